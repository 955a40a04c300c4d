"""The SGLD local learning coefficient estimator (Lau et al. 2023): validate, sample, summarize.

    lambda_hat = nbeta * ( mean over draws t of L_m(w_t)  -  L(w*) )

computed per chain; the reported estimate is the mean over the chains that did not diverge, with its
standard error (result.py). :func:`estimate_llc` estimates at one w*; :func:`estimate_llc_stacked` at
the w* of several checkpoints of one architecture, as one batched computation on the vmap backend.
"""
from __future__ import annotations

import copy
import math
import time
from contextlib import contextmanager
from typing import Callable, Sequence

import numpy as np
import torch
import torch.nn as nn
from torch.utils._pytree import tree_leaves

from plateau_lib.engine.utils import in_book_build, resolve_device
from plateau_lib.llc.result import LLCResult, MAX_LOSS_RATIO, RUNAWAY_SDS, summarize
from plateau_lib.llc.sampler import (SAMPLERS, ParamLayout, TensorBatches, make_batches, make_generator,
    resolve_backend, sgld_sample)


def default_nbeta(batch_size: int) -> float:
    """devinterp v1's default inverse temperature ``m / ln m`` for SGLD batch size m (1 if m <= 1)."""
    return 1.0 if batch_size <= 1 else batch_size / math.log(batch_size)


def _check_number(name, value, *, low=None, strict=True, allowed="", integer=False):
    ok = isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, bool)
    if ok and integer:
        ok = float(value).is_integer()
    if ok:
        ok = math.isfinite(float(value)) and (low is None or (value > low if strict else value >= low))
    if not ok:
        raise ValueError(f"{name} must be {allowed}, got {value!r}")


def _loss_scalar(loss_fn, model, batch) -> torch.Tensor:
    loss = loss_fn(model, batch)
    if not isinstance(loss, torch.Tensor) or loss.numel() != 1 or not loss.is_floating_point():
        shape = tuple(loss.shape) if isinstance(loss, torch.Tensor) else type(loss).__name__
        raise ValueError("loss_fn(model, batch) must return a scalar floating-point tensor (the mean loss "
                         f"on the batch), got {shape}")
    return loss.reshape(())


def estimate_llc(model: nn.Module, loss_fn: Callable, data, *, epsilon: float | None = None,
                 nbeta: float | None = None, gamma: float | None = None, weight_decay: float = 0.0,
                 num_chains: int = 4, num_draws: int = 200, num_burnin_steps: int = 0,
                 num_steps_bw_draws: int = 1, batch_size: int | None = None, seed: int = 0,
                 share_batches: bool = False, init_loss: float | None = None,
                 init_loss_batches: int | None = None, chain_ids: Sequence[int] | None = None,
                 device: str = "auto", backend: str = "auto", mala: bool = False,
                 max_loss_ratio: float = MAX_LOSS_RATIO, runaway_sds: float = RUNAWAY_SDS, progress: bool = False,
                 lr: float | None = None, localization: float | None = None, warn: bool = True,
                 compile: bool = False, tf32: bool = False, cuda_graphs: bool = False,
                 sampler: str = "sgld") -> LLCResult:
    """Estimate the local learning coefficient of ``model`` at its current weights w* with SGLD.

    Parameters (devinterp v1 names in brackets)
    ----------
    model: any ``nn.Module``; its ``requires_grad`` parameters are sampled, the others and buffers are
        held fixed. It is not modified, and is used in whatever train/eval mode it is in (devinterp v1
        calls ``model.train()``).
    loss_fn: ``loss_fn(model, batch) -> scalar tensor``, the *mean* loss on a batch [``evaluate``].
        During sampling ``model`` is a working copy of the module (sequential backend) or a functional
        stand-in that calls it with the chains' weights (vmap), so ``model(x)`` and attribute access work.
    data: a tensor or a tuple of tensors with a common first dimension n (batches are one seeded
        fancy-index each, without replacement within an epoch), or a callable
        ``sample_batch(generator) -> batch`` for online tasks [``loader``].
    epsilon: SGLD step size ε, > 0 [``lr``; default 1e-3, devinterp 0.01].
    nbeta: inverse temperature times n, > 0 [``nbeta``]; default ``m / ln m`` for batch size m, as
        devinterp v1 (``default_nbeta``). For callable data m is ``batch_size`` or, if None, the first
        dimension of a sampled batch.
    gamma: localization strength γ >= 0 [``localization``; default 100, devinterp 0].
    weight_decay: λ >= 0 in the drift term ``+ λ w`` [``weight_decay``].
    num_chains, num_draws: chains (>= 1) and recorded draws per chain (>= 1) [same names; devinterp
        defaults 10 and 100]. The divergence rule compares chains, so run at least 3.
    num_burnin_steps: steps before the first draw, not recorded in the estimate; must be < num_draws.
        (devinterp v1 also excludes burn-in; v2 averages it in.)
    num_steps_bw_draws: SGLD steps per draw (>= 1). Draw k is the loss at step
        ``num_burnin_steps + k * num_steps_bw_draws``, before that step's update: with no burn-in draw 0
        is the loss at w* itself, as in devinterp v1.
    batch_size: SGLD batch size m for tensor data; None = full batch (the whole dataset every step).
    seed: everything random derives from it; the same seed gives the same noise and batches, so use
        one seed at every checkpoint of an LLC-over-training curve.
    share_batches: False (default, devinterp v1's behaviour): each chain has its own batch stream, so
        the chains are independent and ``llc_se`` is an honest standard error of the mean. True
        (devinterp v2's default): all chains see the same batch at each step; their spread then misses
        the batch noise they share and ``llc_se`` understates the error. Ignored for full batch.
    init_loss: L(w*) if known; else computed under ``no_grad`` on ``init_loss_batches``: None = the
        whole tensor dataset in order (the exact L_n(w*); 16 seeded batches for callable data), k = k
        seeded random batches. One scalar is shared by all chains (as v1; v1 uses ``num_chains``
        random loader batches, v2 a per-chain mean over 32 batches).
    chain_ids: run exactly these chain indices (overrides ``num_chains``); chain c's numbers do not depend
        on which other chains run with it.
    device: 'auto', 'cpu', 'cuda', ... (model and data are copied there for sampling).
    backend: 'auto' (vmap on CUDA, sequential otherwise), 'sequential' (one chain after another, plain
        forward+backward: the fast choice on a CPU) or 'vmap' (all chains batched: the fast choice on a
        GPU). Both give the same draws to float rounding.
    mala: also record the hypothetical MALA acceptance probability of each step (devinterp's
        ``MalaAcceptanceRate``; aim for roughly 0.9, 0 or 1 are unhealthy).
    max_loss_ratio, runaway_sds: the divergence rule's constants (``plateau_lib.llc.result``): a chain is
        diverged when a loss is NaN/inf, when its λ̂ is more than ``runaway_sds`` robust SDs above the
        median chain's (at least 3 chains), or when a loss exceeds
        ``init_loss + max_loss_ratio * max(|init_loss|, D / (2 nbeta))`` (D = number of sampled weights).
    progress: show a tqdm bar over chain-steps.
    lr, localization: devinterp spellings of ``epsilon`` and ``gamma`` (give one spelling, not both).
    warn: emit :class:`LLCWarning` for diverged chains and negative estimates (always recorded in
        ``result.warnings``).
    compile: ``torch.compile`` the model (sequential) or the batched gradient step (vmap): a one-off
        compilation, tens of seconds on a CPU (see benchmarks/llc_bench.py for what it buys).
    tf32, cuda_graphs: CUDA only, **not yet validated against the golden tests**: TF32 matmuls during
        sampling; the batched step compiled with ``mode="reduce-overhead"`` (CUDA graphs, vmap backend).
    sampler: 'sgld' (plain SGLD, the papers' sampler) or 'rmsprop_sgld' (SGLD preconditioned by RMSProp's
        second moment, devinterp 2's ``rmsprop_sgld``; the update is in ``plateau_lib.llc.sampler``).

    Differences from devinterp v1: a standard error is reported with the std; diverged chains (runaway,
    not only NaN) are excluded with a warning rather than stopping the run (v1 raises, v2 silently
    averages the finite steps); the default init loss is the full-data loss at w* rather than a few
    random batches.

    Returns an :class:`LLCResult`. Raises ``ValueError`` for invalid arguments before sampling.
    """
    return estimate_llc_stacked([model], loss_fn, data, **{k: v for k, v in locals().items()
                                                             if k not in ("model", "loss_fn", "data")})[0]


def estimate_llc_stacked(models: Sequence[nn.Module], loss_fn: Callable, data, *, epsilon: float | None = None,
                         nbeta: float | None = None, gamma: float | None = None, weight_decay: float = 0.0,
                         num_chains: int = 4, num_draws: int = 200, num_burnin_steps: int = 0,
                         num_steps_bw_draws: int = 1, batch_size: int | None = None, seed: int = 0,
                         share_batches: bool = False, init_loss: float | None = None,
                         init_loss_batches: int | None = None, chain_ids: Sequence[int] | None = None,
                         device: str = "auto", backend: str = "auto", mala: bool = False,
                         max_loss_ratio: float = MAX_LOSS_RATIO, runaway_sds: float = RUNAWAY_SDS,
                         progress: bool = False, lr: float | None = None, localization: float | None = None,
                         warn: bool = True, compile: bool = False, tf32: bool = False,
                         cuda_graphs: bool = False, sampler: str = "sgld") -> list[LLCResult]:
    """:func:`estimate_llc` at the w* of each of ``models`` (checkpoints of one architecture), one
    :class:`LLCResult` each, with the same seed at every checkpoint.

    On the vmap backend the K checkpoints x C chains run as one batched computation; on the sequential
    backend one after another. Either way each result is the one :func:`estimate_llc` gives for that
    model alone (float rounding aside). ``init_loss``, if given, is used for every model; ``elapsed_s``
    of each result is the whole call's time divided by K. Models must share their sampled parameters'
    names and shapes, and their frozen parameters and buffers (else ``ValueError``).
    """
    if lr is not None:
        if epsilon is not None:
            raise ValueError("give the step size as epsilon or lr, not both")
        epsilon = lr
    if localization is not None:
        if gamma is not None:
            raise ValueError("give the localization as gamma or localization, not both")
        gamma = localization
    epsilon = 1e-3 if epsilon is None else epsilon
    gamma = 100.0 if gamma is None else gamma
    _check_number("epsilon (lr)", epsilon, low=0, allowed="a finite number > 0")
    if nbeta is not None:
        _check_number("nbeta", nbeta, low=0, allowed="a finite number > 0 (or None for m / ln m)")
    _check_number("gamma (localization)", gamma, low=0, strict=False, allowed="a finite number >= 0")
    _check_number("weight_decay", weight_decay, low=0, strict=False, allowed="a finite number >= 0")
    _check_number("max_loss_ratio", max_loss_ratio, low=0, allowed="a finite number > 0")
    _check_number("runaway_sds", runaway_sds, low=0, allowed="a finite number > 0")
    if chain_ids is not None:
        chain_ids = list(chain_ids)
        if not chain_ids or any(not isinstance(c, (int, np.integer)) or c < 0 for c in chain_ids) \
                or len(set(chain_ids)) != len(chain_ids):
            raise ValueError(f"chain_ids must be distinct non-negative integers (at least one), got {chain_ids!r}")
    else:
        _check_number("num_chains", num_chains, low=1, strict=False, integer=True, allowed="an integer >= 1")
        chain_ids = list(range(int(num_chains)))
    _check_number("num_draws", num_draws, low=1, strict=False, integer=True, allowed="an integer >= 1")
    _check_number("num_burnin_steps", num_burnin_steps, low=0, strict=False, integer=True,
                  allowed="an integer >= 0")
    if num_burnin_steps >= num_draws:
        raise ValueError(f"num_burnin_steps must be < num_draws ({num_draws}), got {num_burnin_steps}")
    _check_number("num_steps_bw_draws", num_steps_bw_draws, low=1, strict=False, integer=True,
                  allowed="an integer >= 1")
    if batch_size is not None:
        _check_number("batch_size", batch_size, low=1, strict=False, integer=True,
                      allowed="an integer >= 1 (or None for full batch)")
    if init_loss_batches is not None:
        _check_number("init_loss_batches", init_loss_batches, low=1, strict=False, integer=True,
                      allowed="an integer >= 1 (or None)")
    if init_loss is not None:
        _check_number("init_loss", init_loss, allowed="a finite number (or None)")
    if not isinstance(seed, (int, np.integer)) or isinstance(seed, bool) or seed < 0:
        raise ValueError(f"seed must be a non-negative integer, got {seed!r}")
    models = list(models) if isinstance(models, (list, tuple)) else None
    if not models:
        raise ValueError("models must be a non-empty list of torch.nn.Module (checkpoints of one architecture)")
    for model in models:
        if not isinstance(model, nn.Module):
            raise ValueError(f"model must be a torch.nn.Module, got {type(model).__name__}")
        if not any(p.requires_grad for p in model.parameters()):
            raise ValueError("model has no trainable parameters (requires_grad=True): there is nothing to sample")
    if not callable(loss_fn):
        raise ValueError("loss_fn must be callable as loss_fn(model, batch) -> scalar tensor")
    if sampler not in SAMPLERS:
        raise ValueError(f"sampler must be one of {SAMPLERS}, got {sampler!r}")
    if mala and sampler != "sgld":
        raise ValueError(f"mala=True measures plain SGLD's acceptance; it needs sampler='sgld', got {sampler!r}")
    dev = resolve_device(device)
    backend = resolve_backend(backend, dev)
    for name, value in (("tf32", tf32), ("cuda_graphs", cuda_graphs)):
        if value and dev.type != "cuda":
            raise ValueError(f"{name}=True needs a CUDA device, got device {str(dev)!r}")
    if cuda_graphs and backend != "vmap":
        raise ValueError(f"cuda_graphs=True needs backend='vmap', got {backend!r}")

    batches = make_batches(data, batch_size, dev)
    models = [m if next(m.parameters()).device == dev else copy.deepcopy(m).to(dev) for m in models]
    _check_same_architecture(models, dev)

    # loss at each w* (also checks that loss_fn returns a scalar) and the default nbeta
    init_losses = []
    with torch.no_grad():
        if isinstance(batches, TensorBatches):
            first = next(iter(batches.init_batches(None, make_generator(seed, -1, "init", dev))))
            m = batches.batch_size
        else:
            first = data(make_generator(seed, -1, "init", dev))
            leaves = [x for x in tree_leaves(first) if isinstance(x, torch.Tensor)]
            m = batch_size if batch_size is not None else (leaves[0].shape[0] if leaves else 1)
        _loss_scalar(loss_fn, models[0], first)
        for model in models:
            init_losses.append(_init_loss(loss_fn, model, batches, init_loss_batches, seed, dev)
                               if init_loss is None else float(init_loss))
    nbeta = default_nbeta(m) if nbeta is None else float(nbeta)

    num_steps = num_burnin_steps + num_draws * num_steps_bw_draws
    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=num_steps * len(chain_ids) * len(models), desc=f"SGLD {len(chain_ids)} chains",
                   unit="chain-step", leave=False, disable=in_book_build())
    t0 = time.perf_counter()
    with _tf32(tf32):
        out = sgld_sample(models, loss_fn, batches, epsilon=float(epsilon), nbeta=nbeta, gamma=float(gamma),
                          weight_decay=float(weight_decay), num_steps=num_steps, chain_ids=chain_ids, seed=int(seed),
                          share_batches=share_batches, device=dev, backend=backend, mala=mala, progress=bar,
                          compile=compile, cuda_graphs=cuda_graphs, sampler=sampler)
    elapsed = (time.perf_counter() - t0) / len(models)
    if bar is not None:
        bar.close()

    hyper = {"epsilon": float(epsilon), "nbeta": nbeta, "gamma": float(gamma), "weight_decay": float(weight_decay),
             "num_chains": len(chain_ids), "num_draws": int(num_draws), "num_burnin_steps": int(num_burnin_steps),
             "num_steps_bw_draws": int(num_steps_bw_draws),
             "batch_size": None if getattr(batches, "full", False) else int(m), "seed": int(seed),
             "share_batches": bool(share_batches), "num_params": out["num_params"], "backend": backend,
             "max_loss_ratio": float(max_loss_ratio), "runaway_sds": float(runaway_sds), "sampler": sampler}
    mala_out = out["mala"]
    return [summarize(out["loss"][k].double().numpy(), init_losses[k], hyper, chain_ids, elapsed,
                      None if mala_out is None else mala_out[k].numpy(), max_loss_ratio, runaway_sds, warn)
            for k in range(len(models))]


def _init_loss(loss_fn, model, batches, init_loss_batches, seed, dev) -> float:
    """L(w*) on ``init_loss_batches`` (see :func:`estimate_llc`), under ``no_grad``."""
    total, weight = 0.0, 0
    for b in batches.init_batches(init_loss_batches, make_generator(seed, -1, "init", dev)):
        size = tree_leaves(b)[0].shape[0]
        total = total + _loss_scalar(loss_fn, model, b).double() * size
        weight += size
    value = float(total / weight)
    if not math.isfinite(value):
        raise ValueError(f"the loss at w* is not finite ({value}); cannot estimate an LLC there")
    return value


def _check_same_architecture(models, dev) -> None:
    """Stacked checkpoints must sample the same parameters and hold the same frozen tensors."""
    ref = ParamLayout.from_model(models[0], dev)
    for i, model in enumerate(models[1:], 1):
        layout = ParamLayout.from_model(model, dev)
        if (layout.names, layout.shapes) != (ref.names, ref.shapes):
            raise ValueError(f"checkpoints stacked together must have the same sampled parameters and shapes; "
                             f"checkpoint {i} differs from checkpoint 0")
        if layout.fixed.keys() != ref.fixed.keys() or any(not torch.equal(layout.fixed[k], ref.fixed[k])
                                                          for k in ref.fixed):
            raise ValueError(f"checkpoints stacked together must share their frozen parameters and buffers; "
                             f"checkpoint {i} differs from checkpoint 0")


@contextmanager
def _tf32(enabled: bool):
    """TF32 matmuls inside the block when ``enabled`` (CUDA only; restored afterwards)."""
    before = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = before or enabled
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32 = before
