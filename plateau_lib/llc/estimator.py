"""The SGLD local learning coefficient estimator (Lau et al. 2023): validate, sample, summarize.
The settings are one :class:`SGLDConfig` (config.py); the rest are run options.

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
from plateau_lib.llc.config import SGLDConfig, check_number
from plateau_lib.llc.result import LLCResult, MAX_LOSS_RATIO, RUNAWAY_SDS, summarize
from plateau_lib.llc.sampler import (ParamLayout, TensorBatches, make_batches, make_generator,
    resolve_backend, sgld_sample)


def default_nbeta(batch_size: int) -> float:
    """devinterp v1's default inverse temperature ``m / ln m`` for SGLD batch size m (1 if m <= 1)."""
    return 1.0 if batch_size <= 1 else batch_size / math.log(batch_size)


def _loss_scalar(loss_fn, model, batch) -> torch.Tensor:
    loss = loss_fn(model, batch)
    if not isinstance(loss, torch.Tensor) or loss.numel() != 1 or not loss.is_floating_point():
        shape = tuple(loss.shape) if isinstance(loss, torch.Tensor) else type(loss).__name__
        raise ValueError("loss_fn(model, batch) must return a scalar floating-point tensor (the mean loss "
                         f"on the batch), got {shape}")
    return loss.reshape(())


def estimate_llc(model: nn.Module, loss_fn: Callable, data, sgld: SGLDConfig, **run) -> LLCResult:
    """Estimate the local learning coefficient of ``model`` at its current weights w* with SGLD.

    model: any ``nn.Module``; its ``requires_grad`` parameters are sampled, the others and buffers are held
        fixed. It is not modified, and is used in whatever train/eval mode it is in (devinterp v1 calls
        ``model.train()``).
    loss_fn: ``loss_fn(model, batch) -> scalar tensor``, the *mean* loss on a batch [devinterp's ``evaluate``].
        During sampling ``model`` is a working copy of the module (sequential backend) or a functional stand-in
        that calls it with the chains' weights (vmap), so ``model(x)`` and attribute access work.
    data: a tensor or a tuple of tensors with a common first dimension n (batches are one seeded fancy-index
        each, without replacement within an epoch), or a callable ``sample_batch(generator) -> batch`` for
        online tasks [``loader``].
    sgld: the :class:`SGLDConfig` (its ``n_data`` is the caller's business: ``data`` is what is sampled).
        Draw k is the loss at step ``num_burnin_steps + k * num_steps_bw_draws``, before that step's update:
        with no burn-in draw 0 is the loss at w* itself, as in devinterp v1 (which also excludes burn-in; v2
        averages it in). Use one seed at every checkpoint of an LLC-over-training curve. With
        ``share_batches=False`` (devinterp v1) the chains are independent and ``llc_se`` is an honest standard
        error; with True (devinterp v2) their spread misses the batch noise they share.
    run: how to run it, the options of :func:`estimate_llc_stacked`.

    Differences from devinterp v1: a standard error is reported with the std; diverged chains (runaway, not
    only NaN) are excluded with a warning rather than stopping the run (v1 raises, v2 silently averages the
    finite steps); the default init loss is the full-data loss at w* rather than a few random batches.

    Returns an :class:`LLCResult`. Raises ``ValueError`` for invalid arguments before sampling.
    """
    return estimate_llc_stacked([model], loss_fn, data, sgld, **run)[0]


def estimate_llc_stacked(models: Sequence[nn.Module], loss_fn: Callable, data, sgld: SGLDConfig, *,
                         init_loss: float | None = None, init_loss_batches: int | None = None,
                         chain_ids: Sequence[int] | None = None, device: str = "auto", backend: str = "auto",
                         mala: bool = False, max_loss_ratio: float = MAX_LOSS_RATIO, runaway_sds: float = RUNAWAY_SDS,
                         progress: bool = False, warn: bool = True, compile: bool = False, tf32: bool = False,
                         cuda_graphs: bool = False) -> list[LLCResult]:
    """:func:`estimate_llc` at the w* of each of ``models`` (checkpoints of one architecture), one
    :class:`LLCResult` each, with the same seed at every checkpoint.

    On the vmap backend the K checkpoints x C chains run as one batched computation; on the sequential
    backend one after another. Either way each result is the one :func:`estimate_llc` gives for that
    model alone (float rounding aside). ``elapsed_s`` of each result is the whole call's time divided by K.
    Models must share their sampled parameters' names and shapes, and their frozen parameters and buffers
    (else ``ValueError``).

    The run options (not statistical; :func:`estimate_llc` takes the same):

    init_loss: L(w*) if known (used for every model); else computed under ``no_grad`` on ``init_loss_batches``:
        None = the whole tensor dataset in order (the exact L_n(w*); 16 seeded batches for callable data),
        k = k seeded random batches. One scalar is shared by all chains.
    chain_ids: run exactly these chain indices (instead of ``range(sgld.num_chains)``); chain c's numbers do
        not depend on which other chains run with it.
    device: 'auto', 'cpu', 'cuda', ... (model and data are copied there for sampling).
    backend: 'auto' (vmap on CUDA, sequential otherwise), 'sequential' (one chain after another: the fast
        choice on a CPU) or 'vmap' (all chains batched: the fast choice on a GPU); the same draws to rounding.
    mala: also record the hypothetical MALA acceptance probability of each step (aim for roughly 0.9).
    max_loss_ratio, runaway_sds: the divergence rule's constants (``plateau_lib.llc.result``).
    progress: a tqdm bar over chain-steps. warn: emit :class:`LLCWarning` for diverged chains and negative
        estimates (always recorded in ``result.warnings``).
    compile: ``torch.compile`` the model (sequential) or the batched step (vmap), a one-off compilation.
    tf32, cuda_graphs: CUDA only, **not yet validated against the golden tests**: TF32 matmuls; the batched
        step compiled with ``mode="reduce-overhead"`` (vmap backend).
    """
    if not isinstance(sgld, SGLDConfig):
        raise ValueError(f"sgld must be an SGLDConfig, got {type(sgld).__name__}")
    check_number("max_loss_ratio", max_loss_ratio, low=0, allowed="a finite number > 0")
    check_number("runaway_sds", runaway_sds, low=0, allowed="a finite number > 0")
    if chain_ids is not None:
        chain_ids = list(chain_ids)
        if not chain_ids or any(not isinstance(c, (int, np.integer)) or c < 0 for c in chain_ids) \
                or len(set(chain_ids)) != len(chain_ids):
            raise ValueError(f"chain_ids must be distinct non-negative integers (at least one), got {chain_ids!r}")
    else:
        chain_ids = list(range(int(sgld.num_chains)))
    if init_loss_batches is not None:
        check_number("init_loss_batches", init_loss_batches, low=1, strict=False, integer=True,
                     allowed="an integer >= 1 (or None)")
    if init_loss is not None:
        check_number("init_loss", init_loss, allowed="a finite number (or None)")
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
    if mala and sgld.sampler != "sgld":
        raise ValueError(f"mala=True measures plain SGLD's acceptance; it needs sampler='sgld', got {sgld.sampler!r}")
    dev = resolve_device(device)
    backend = resolve_backend(backend, dev)
    for name, value in (("tf32", tf32), ("cuda_graphs", cuda_graphs)):
        if value and dev.type != "cuda":
            raise ValueError(f"{name}=True needs a CUDA device, got device {str(dev)!r}")
    if cuda_graphs and backend != "vmap":
        raise ValueError(f"cuda_graphs=True needs backend='vmap', got {backend!r}")

    batches = make_batches(data, sgld.batch_size, dev)
    models = [m if next(m.parameters()).device == dev else copy.deepcopy(m).to(dev) for m in models]
    _check_same_architecture(models, dev)

    # loss at each w* (also checks that loss_fn returns a scalar) and the default nbeta
    init_losses = []
    with torch.no_grad():
        if isinstance(batches, TensorBatches):
            first = next(iter(batches.init_batches(None, make_generator(sgld.seed, -1, "init", dev))))
            m = batches.batch_size
        else:
            first = data(make_generator(sgld.seed, -1, "init", dev))
            leaves = [x for x in tree_leaves(first) if isinstance(x, torch.Tensor)]
            m = sgld.batch_size if sgld.batch_size is not None else (leaves[0].shape[0] if leaves else 1)
        _loss_scalar(loss_fn, models[0], first)
        for model in models:
            init_losses.append(_init_loss(loss_fn, model, batches, init_loss_batches, sgld.seed, dev)
                               if init_loss is None else float(init_loss))
    nbeta = default_nbeta(m) if sgld.nbeta is None else float(sgld.nbeta)

    num_steps = sgld.num_burnin_steps + sgld.num_draws * sgld.num_steps_bw_draws
    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=num_steps * len(chain_ids) * len(models), desc=f"SGLD {len(chain_ids)} chains",
                   unit="chain-step", leave=False, disable=in_book_build())
    t0 = time.perf_counter()
    with _tf32(tf32):
        out = sgld_sample(models, loss_fn, batches, epsilon=float(sgld.epsilon), nbeta=nbeta, gamma=float(sgld.gamma),
                          weight_decay=float(sgld.weight_decay), num_steps=num_steps, chain_ids=chain_ids,
                          seed=int(sgld.seed), share_batches=sgld.share_batches, device=dev, backend=backend,
                          mala=mala, progress=bar, compile=compile, cuda_graphs=cuda_graphs, sampler=sgld.sampler)
    elapsed = (time.perf_counter() - t0) / len(models)
    if bar is not None:
        bar.close()

    hyper = {"epsilon": float(sgld.epsilon), "nbeta": nbeta, "gamma": float(sgld.gamma),
             "weight_decay": float(sgld.weight_decay), "num_chains": len(chain_ids), "num_draws": int(sgld.num_draws),
             "num_burnin_steps": int(sgld.num_burnin_steps), "num_steps_bw_draws": int(sgld.num_steps_bw_draws),
             "batch_size": None if getattr(batches, "full", False) else int(m), "seed": int(sgld.seed),
             "share_batches": sgld.share_batches, "num_params": out["num_params"], "backend": backend,
             "max_loss_ratio": float(max_loss_ratio), "runaway_sds": float(runaway_sds), "sampler": sgld.sampler}
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
