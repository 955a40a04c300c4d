"""How a trained in-context regression model solves M = 1 and M = 2 pretraining tasks.

The Bayes predictor of a task set T_M is dMMSE: ŷ_k = Σ_m p_k(m) t_mᵀx_k with the posterior
p_k(m) = softmax_m(−Σ_{j<k} (y_j − t_mᵀx_j)² / (2σ²)), uniform at the first token. Two hypotheses follow:

- **M = 1**: the posterior is 1, so ŷ_k = t₁ᵀx_k from the very first token: the model ignores the context.
- **M = 2**: ŷ_k = p_k t₁ᵀx_k + (1 − p_k) t₂ᵀx_k, a two-hypothesis posterior with p_1 = 1/2 that the
  context sharpens towards the true task.

The tests below measure both on fresh sequences of the training distribution, per token (1-based), and
judge them by the documented tolerances; ``attention_summary`` shows where each x-token's query looks.
"""
from __future__ import annotations

import itertools
import math
import numbers

import numpy as np
import pandas as pd
import torch

from . import baselines as B

SINGLE_TOL = 0.02   # M = 1: E[(ŷ − t₁ᵀx)²] < 2% of E[(t₁ᵀx)²] at every token (ignoring the context scores 1)
DELTA_TOL = 0.02    # M = 2: Δ(model, dMMSE) < 2% of the variance of the dMMSE prediction at every token
WEIGHT_TOL = 0.1    # M = 2: mean |p̂ − p| of the implied weight below 0.1 at every token
GAP = 0.5           # M = 2: p̂ only where |(t₁ − t₂)ᵀx| > GAP · |t₁ − t₂| (half its standard deviation)


def _integer(name, value, low):
    if not isinstance(value, numbers.Integral) or isinstance(value, bool) or value < low:
        raise ValueError(f"parameter {name!r} must be an integer >= {low}, got {value!r}")
    return int(value)


def _positive(name, value):
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not 0 < value < math.inf:
        raise ValueError(f"parameter {name!r} must be a finite number > 0, got {value!r}")
    return float(value)


def _device(model):
    """The model's device (its first parameter or buffer; CPU for a module with neither)."""
    first = next(itertools.chain(model.parameters(), model.buffers()), None)
    return torch.device("cpu") if first is None else first.device


def _true_index(ws, tasks):
    """Index in T_M of the task that generated each sequence (B,)."""
    return torch.cdist(ws, tasks).argmin(1)


def _sequences(model, task, n, seed, M=None):
    """n fresh training sequences from the task's own seeded generator on the model's device, with the
    model's predictions (under no_grad) and T_M: (xs, ys, ws, pred, tasks)."""
    n, seed = _integer("n", n, 1), _integer("seed", seed, 0)
    if task.M is None or (M is not None and task.M != M):
        raise ValueError(f"parameter 'task' must have M = {M or 'a finite number of tasks'}, got M = {task.M}")
    device = _device(model)
    xs, ys, ws = task.sample(n, torch.Generator(device=device).manual_seed(seed))
    with torch.no_grad():
        pred = model(xs, ys)
    return xs, ys, ws, pred, task.tasks(device)


def _numpy(t):
    return t.detach().double().cpu().numpy()


def posterior_weights(xs, ys, tasks, noise_var) -> torch.Tensor:
    """dMMSE's posterior (B, K, M) over the M tasks before each prediction: softmax over m of
    −Σ_{j<k}(y_j − t_mᵀx_j)²/(2σ²); uniform at the first token. ``weights @ tasks`` is dMMSE's ŵ_k."""
    if xs.ndim != 3:
        raise ValueError(f"parameter 'xs' must have shape (B, K, D), got {tuple(xs.shape)}")
    if ys.shape != xs.shape[:2]:
        raise ValueError(f"parameter 'ys' must have shape {tuple(xs.shape[:2])}, got {tuple(ys.shape)}")
    if tasks.ndim != 2 or tasks.shape[1] != xs.shape[2]:
        raise ValueError(f"parameter 'tasks' must have shape (M, {xs.shape[2]}), got {tuple(tasks.shape)}")
    noise_var = _positive("noise_var", noise_var)
    sq = (ys.unsqueeze(-1) - xs @ tasks.to(xs).T).square()
    return torch.softmax(-B._before(sq) / (2 * noise_var), dim=-1)


def token_table(model, task, n=2048, seed=0) -> pd.DataFrame:
    """One row per token k = 1..K on n fresh training sequences: MSE (against the noisy y) of the model,
    dMMSE and ridge, Δ(model, dMMSE), Δ(model, ridge), and the mean posterior weight of the true task."""
    xs, ys, ws, pred, tasks = _sequences(model, task, n, seed)
    dmmse, ridge = B.dmmse_predict(xs, ys, tasks, task.noise_var), B.ridge_predict(xs, ys, task.noise_var)
    post = posterior_weights(xs, ys, tasks, task.noise_var)
    true = _true_index(ws, tasks).view(-1, 1, 1).expand(-1, task.K, 1)
    columns = {"mse_model": (pred - ys).square().mean(0), "mse_dmmse": (dmmse - ys).square().mean(0),
               "mse_ridge": (ridge - ys).square().mean(0), "delta_dmmse": B.delta(pred, dmmse, by_token=True),
               "delta_ridge": B.delta(pred, ridge, by_token=True), "p_true": post.gather(2, true)[..., 0].mean(0)}
    return pd.DataFrame({"token": np.arange(1, task.K + 1), **{k: _numpy(v) for k, v in columns.items()}})


def single_task_test(model, task, n=2048, seed=0, tol=SINGLE_TOL) -> dict:
    """M = 1: does the model predict t₁ᵀx_k at every token, the first included? Per token the relative
    error E[(ŷ − t₁ᵀx)²]/E[(t₁ᵀx)²] (ridge's, which must learn t₁ from the context, for comparison);
    ``holds`` if every token's is below ``tol``. Returns {table, first_token_rel_error, tol, holds}."""
    tol = _positive("tol", tol)
    xs, ys, _, pred, tasks = _sequences(model, task, n, seed, M=1)
    target, scale = xs @ tasks[0], (xs @ tasks[0]).square().mean(0)
    rel = _numpy((pred - target).square().mean(0) / scale)
    rel_ridge = _numpy((B.ridge_predict(xs, ys, task.noise_var) - target).square().mean(0) / scale)
    table = pd.DataFrame({"token": np.arange(1, task.K + 1), "rel_error": rel, "rel_error_ridge": rel_ridge})
    return {"table": table, "first_token_rel_error": float(rel[0]), "tol": tol, "holds": bool((rel < tol).all())}


def _corr(a, b):
    """Pearson correlation, NaN when either side is constant or has fewer than two values."""
    if len(a) < 2 or a.std() == 0 or b.std() == 0:
        return float("nan")
    return float(np.corrcoef(a, b)[0, 1])


def two_task_test(model, task, n=2048, seed=0, tol=DELTA_TOL, weight_tol=WEIGHT_TOL, gap=GAP) -> dict:
    """M = 2: is the model the two-hypothesis posterior ŷ_k = p_k t₁ᵀx_k + (1 − p_k) t₂ᵀx_k?

    Per token: ``rel_delta`` = Δ(model, dMMSE) / Var(dMMSE prediction); the model's implied weight on t₁,
    p̂ = (ŷ − t₂ᵀx)/(t₁ᵀx − t₂ᵀx), on the ``n_used`` sequences with |(t₁ − t₂)ᵀx| > gap·|t₁ − t₂| (elsewhere
    p̂ divides by almost nothing: its error is |ŷ − dMMSE|/|(t₁ − t₂)ᵀx|), against the posterior p_k
    (``implied_mean``, ``posterior_mean``, ``weight_mae``, ``weight_corr``; NaN where p_k is constant, as
    at k = 1 where p_1 = 1/2); and ``p_true``, the mean posterior weight of the true task, the theory's
    curve. ``holds`` if every token has rel_delta < tol and weight_mae < weight_tol.
    Returns {table, tol, weight_tol, gap, holds}."""
    tol, weight_tol, gap = _positive("tol", tol), _positive("weight_tol", weight_tol), _positive("gap", gap)
    xs, ys, ws, pred, tasks = _sequences(model, task, n, seed, M=2)
    dmmse = B.dmmse_predict(xs, ys, tasks, task.noise_var)
    post = posterior_weights(xs, ys, tasks, task.noise_var)
    a, b = xs @ tasks[0], xs @ tasks[1]
    rel_delta = _numpy(B.delta(pred, dmmse, by_token=True) / dmmse.var(0))
    keep = ((a - b).abs() > gap * (tasks[0] - tasks[1]).norm()).cpu().numpy()
    implied, p1 = _numpy((pred - b) / (a - b)), _numpy(post[..., 0])
    true = _true_index(ws, tasks).view(-1, 1, 1).expand(-1, task.K, 1)
    p_true = _numpy(post.gather(2, true)[..., 0].mean(0))
    rows = []
    for k in range(task.K):
        m = keep[:, k]
        ph, p = implied[m, k], p1[m, k]
        rows.append({"token": k + 1, "rel_delta": rel_delta[k], "n_used": int(m.sum()),
                     "implied_mean": ph.mean() if m.any() else np.nan, "posterior_mean": p1[:, k].mean(),
                     "weight_mae": np.abs(ph - p).mean() if m.any() else np.nan, "weight_corr": _corr(ph, p),
                     "p_true": p_true[k]})
    table = pd.DataFrame(rows)
    holds = bool((table["rel_delta"] < tol).all() and (table["weight_mae"] < weight_tol).all())
    return {"table": table, "tol": tol, "weight_tol": weight_tol, "gap": gap, "holds": holds}


def attention_maps(model, task, n=512, seed=0) -> np.ndarray:
    """Batch-mean attention (L, H, 2K, 2K) on n fresh training sequences, for heat-maps."""
    n, seed = _integer("n", n, 1), _integer("seed", seed, 0)
    device = _device(model)
    xs, ys, _ = task.sample(n, torch.Generator(device=device).manual_seed(seed))
    with torch.no_grad():
        _, inside = model(xs, ys, return_internals=True)
    return _numpy(torch.stack([att.mean(0) for att in inside["attn"]]))


def attention_summary(model, task, n=512, seed=0) -> pd.DataFrame:
    """Where each x-token's query looks: per layer, head and token k = 1..K (query position 2(k−1)), the
    batch-mean attention mass on itself, on the earlier x-tokens and on the earlier y-tokens (the three sum
    to 1 under the causal mask). Tidy rows (layer, head, token, target, mass)."""
    maps = attention_maps(model, task, n, seed)
    L, H, T, _ = maps.shape
    mass = np.stack([np.stack([maps[:, :, 2 * k, 2 * k], maps[:, :, 2 * k, 0:2 * k:2].sum(-1),
                               maps[:, :, 2 * k, 1:2 * k:2].sum(-1)], -1) for k in range(T // 2)], 2)
    index = pd.MultiIndex.from_product([range(L), range(H), range(1, T // 2 + 1), ["self", "earlier_x", "earlier_y"]],
                                       names=["layer", "head", "token", "target"])
    return pd.Series(mass.reshape(-1), index=index, name="mass").reset_index()
