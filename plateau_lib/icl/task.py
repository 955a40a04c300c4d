"""In-context linear regression as a task of the one training loop (``train.py``; see ``tasks.Task``).

``TrainConfig(task="icl_regression", task_kwargs={...}, n_layer=2, n_head=4, d_model=64)`` is Hoogland
et al.'s L2H4 model; the paper's training is ``schedule="one_cycle"``, ``lr=3e-3``, ``batch_size=256``.
The attention is always softmax (``TrainConfig.softmax`` is not used here).

The evaluation reports, on the run's fixed held-out batch (all per token, i.e. means over the K
predictions, and not divided by D, as in Hoogland et al.):

- ``loss`` and ``loss_token`` (K,): MSE against the noisy targets;
- ``loss_ridge``/``delta_ridge`` (and ``delta_ridge_token``): ridge's loss, and Δ of the model to ridge;
  for finite M also ``loss_dmmse``/``delta_dmmse``, ``delta_task_mean`` (Δ to the task-pool mean
  predictor t̄ᵀx, Hoogland et al.'s "task prior" score) and, on the same inputs with fresh Gaussian tasks
  (Raventós et al.'s 𝒯_True, Carroll et al.'s OOD loss), ``loss_true`` (with the baselines'
  ``loss_ridge_true`` and ``loss_dmmse_true``), ``delta_ridge_true`` and ``delta_dmmse_true``;
- ``pred_sq``: the mean-square prediction (Δ to the zero predictor, the LR1 marker);
- ICL scores (1-based tokens): ``icl_score`` = ℓ_K − ℓ_1, and the two variants of Hoogland et al.
  App. D.1.2, ``icl_1_D`` = ℓ_D − ℓ_1 (locating the task) and ``icl_D_K`` = ℓ_K − ℓ_D (refining it), with
  D capped at K; the paper's formulas are lost in our copy of its text, so this reading is ours;
- ``loss_ood_inputs``/``loss_ood_tasks``: the loss with inputs or tasks scaled by ``ood_scale`` g
  (``data.ood_batch``), keeping the batch's noise σ²;
- ``weight_norm``: the L2 norm of all parameters;
- arrays: ``attn`` (n_layer, H, 2K, 2K), the batch-mean attention; ``pred``, ``pred_ridge`` and ``y``
  (n, K) on the first ``n_show`` sequences; with ``n_root`` > 0, ``pred_root`` (n_root, K): the predictions
  on the fixed root-task sequences of ``data.root_probe`` (the rows of the joint trajectory PCA), in float16.
"""
from __future__ import annotations

import math
import numbers

import numpy as np
import pandas as pd
import torch

from plateau_lib.icl import baselines as B, data
from plateau_lib.icl.model import ICLConfig, ICLTransformer

TRUE_TASK_SEED = 2_000_003  # seeds the fresh Gaussian tasks of the 𝒯_True evaluation (finite M)


class ICLRegression:
    """x ~ N(0, I_D), y = wᵀx + N(0, σ²), K pairs; tasks Gaussian (M = None or inf) or uniform over the
    nested set T_M fixed by ``task_seed``. ``d_mlp`` and ``doubled_residual`` configure the model
    (``model.ICLConfig``); width, depth and heads come from the TrainConfig. ``n_root`` root-task sequences
    are predicted at every evaluation for the trajectory PCA (0: none)."""

    name = "icl_regression"
    omega_is_fixed = False  # no attention-biasing intervention here
    samples_on_cpu = False  # the data are drawn on the run's device
    n_show = 16  # sequences whose predictions are kept at every evaluation
    TOKEN_COLUMNS = {"loss_token": "loss", "delta_ridge_token": "delta_ridge", "delta_dmmse_token": "delta_dmmse"}

    def __init__(self, D=4, K=8, noise_var=0.125, M=None, task_seed=0, ood_scale=5.0, d_mlp=64,
                 doubled_residual=True, n_root=0):
        self.M = data.check_params(D, K, noise_var, M)
        for name, value, low in (("task_seed", task_seed, 0), ("d_mlp", d_mlp, 1), ("n_root", n_root, 0)):
            if not isinstance(value, numbers.Integral) or isinstance(value, bool) or value < low:
                raise ValueError(f"task parameter {name!r} must be an integer >= {low}, got {value!r}")
        if isinstance(ood_scale, bool) or not isinstance(ood_scale, numbers.Real) or not 0 < ood_scale < math.inf:
            raise ValueError(f"task parameter 'ood_scale' must be a finite number > 0, got {ood_scale!r}")
        if not isinstance(doubled_residual, bool):
            raise ValueError(f"task parameter 'doubled_residual' must be True or False, got {doubled_residual!r}")
        self.D, self.K, self.noise_var, self.task_seed = int(D), int(K), float(noise_var), int(task_seed)
        self.ood_scale, self.d_mlp, self.doubled_residual = float(ood_scale), int(d_mlp), doubled_residual
        self.n_root = int(n_root)
        self._tasks = {}    # T_M by device, made on first use
        self._memo = None   # (eval batch, its baselines): computed once per held-out batch

    def tasks(self, device="cpu"):
        """T_M on ``device`` (None for Gaussian tasks)."""
        if self.M is None:
            return None
        device = torch.device(device)
        if device not in self._tasks:
            self._tasks[device] = data.task_set(self.M, self.D, self.task_seed).to(device)
        return self._tasks[device]

    def sample(self, batch: int, generator: torch.Generator, device=None):
        """(xs (B, K, D), ys (B, K), ws (B, D)) drawn online on the generator's device."""
        if not isinstance(batch, numbers.Integral) or isinstance(batch, bool) or batch < 1:
            raise ValueError(f"batch must be an integer >= 1, got {batch!r}")
        device = generator.device if device is None else torch.device(device)
        return data.sample(batch, self.K, self.D, self.noise_var, generator, self.tasks(device), device)

    # --- what the training loop asks of a task -------------------------------------------------
    def model_config(self, cfg) -> ICLConfig:
        return ICLConfig(D=self.D, K=self.K, n_layer=cfg.n_layer, n_head=cfg.n_head, d_model=cfg.d_model,
                         d_mlp=self.d_mlp, doubled_residual=self.doubled_residual)

    def build_model(self, cfg) -> ICLTransformer:
        return ICLTransformer(self.model_config(cfg))

    def attention_bias(self, c: float, device):
        if c != 1.0:
            raise ValueError(f"the attention-biasing intervention is not defined for {self.name!r}; got c = {c}")
        return None

    def loss(self, model, batch, attn_bias=None):
        """MSE over the batch and the K predictions (pure tensor code: it runs under vmap and grad)."""
        xs, ys, _ = batch
        return (model(xs, ys) - ys).square().mean()

    def _baselines(self, batch) -> dict:
        """Bayes predictions on ``batch`` (and its 𝒯_True companion for finite M), once per batch."""
        if self._memo is not None and self._memo[0] is batch:
            return self._memo[1]
        xs, ys, ws = batch
        tasks = self.tasks(xs.device)
        base = {"ridge": B.ridge_predict(xs, ys, self.noise_var)}
        if tasks is not None:
            base["dmmse"] = B.dmmse_predict(xs, ys, tasks, self.noise_var)
            base["task_mean"] = xs @ tasks.mean(0)
            g = torch.Generator(device=xs.device).manual_seed(self.task_seed + TRUE_TASK_SEED)
            true_ws = torch.randn(ws.shape, generator=g, device=xs.device)
            true = (xs, data.targets(xs, true_ws, ys - data.targets(xs, ws, 0.0)), true_ws)
            base["true"] = true
            base["true_ridge"] = B.ridge_predict(true[0], true[1], self.noise_var)
            base["true_dmmse"] = B.dmmse_predict(true[0], true[1], tasks, self.noise_var)
        if self.n_root:
            base["root"] = data.root_probe(self.n_root, self.K, self.D, self.noise_var, self.task_seed, xs.device)
        self._memo = (batch, base)
        return base

    @torch.no_grad()
    def evaluate(self, model, batch, attn_bias=None) -> dict:
        """The markers listed in the module docstring, as device tensors (no host syncs)."""
        xs, ys, _ = batch
        base = self._baselines(batch)
        pred, inside = model(xs, ys, return_internals=True)
        loss_token = (pred - ys).square().mean(0)
        first, d, last, n = 0, min(self.D, self.K) - 1, self.K - 1, self.n_show  # token indices (0-based)
        out = {
            "loss": loss_token.mean(),
            "loss_ridge": (base["ridge"] - ys).square().mean(),
            "delta_ridge": B.delta(pred, base["ridge"]),
            "pred_sq": pred.square().mean(),
            "icl_score": loss_token[last] - loss_token[first],
            "icl_1_D": loss_token[d] - loss_token[first],
            "icl_D_K": loss_token[last] - loss_token[d],
        }
        for kind in ("inputs", "tasks"):
            ox, oy, _ = data.ood_batch(batch, self.ood_scale, kind)
            out[f"loss_ood_{kind}"] = (model(ox, oy) - oy).square().mean()
        if "dmmse" in base:
            true_xs, true_ys, _ = base["true"]
            true_pred = model(true_xs, true_ys)
            out.update(loss_dmmse=(base["dmmse"] - ys).square().mean(), delta_dmmse=B.delta(pred, base["dmmse"]),
                       delta_task_mean=B.delta(pred, base["task_mean"]),
                       loss_true=(true_pred - true_ys).square().mean(),
                       loss_ridge_true=(base["true_ridge"] - true_ys).square().mean(),
                       loss_dmmse_true=(base["true_dmmse"] - true_ys).square().mean(),
                       delta_ridge_true=B.delta(true_pred, base["true_ridge"]),
                       delta_dmmse_true=B.delta(true_pred, base["true_dmmse"]))
        out["weight_norm"] = torch.sqrt(sum(p.square().sum() for p in model.parameters()))
        out["loss_token"] = loss_token
        out["delta_ridge_token"] = B.delta(pred, base["ridge"], by_token=True)
        if "dmmse" in base:
            out["delta_dmmse_token"] = B.delta(pred, base["dmmse"], by_token=True)
        out.update(attn=torch.stack([a.mean(0) for a in inside["attn"]]), pred=pred[:n], pred_ridge=base["ridge"][:n],
                   y=ys[:n])
        if "root" in base:
            out["pred_root"] = model(*base["root"][:2])
        return out

    def tables(self, evals: list, seed: int) -> tuple[pd.DataFrame, pd.DataFrame, dict]:
        """``evals`` [(step, host dict)] -> (scalar markers by step; per-token loss and Δ by step and token
        (1-based); arrays stacked over evaluations, with "step")."""
        keys = list(evals[0][1])
        scalars = [k for k in keys if evals[0][1][k].ndim == 0]
        metrics = pd.DataFrame([{"step": s, "seed": seed, **{k: float(out[k]) for k in scalars}} for s, out in evals])
        per_token = [k for k in self.TOKEN_COLUMNS if k in keys]
        tokens = pd.DataFrame([{"step": s, "seed": seed, "token": j + 1,
                                **{self.TOKEN_COLUMNS[k]: float(out[k][j]) for k in per_token}}
                               for s, out in evals for j in range(self.K)])
        arrays = {"step": np.array([s for s, _ in evals])}
        arrays.update({k: np.stack([out[k].numpy() for _, out in evals]) for k in keys
                       if k not in scalars and k not in per_token})
        if "pred_root" in arrays:  # at half precision: read only by the joint trajectory PCA, whose two components
            # move by 1e-5 of their range so (Carroll's paper-scale M = 64 run), while its result shrinks by a third
            arrays["pred_root"] = arrays["pred_root"].astype(np.float16)
        return metrics, tokens, arrays
