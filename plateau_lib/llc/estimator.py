"""The SGLD local learning coefficient estimator (Lau et al. 2023) with its diagnostics.

    lambda_hat = nbeta * ( mean over draws t of L_m(w_t)  -  L(w*) )

computed per chain; the reported estimate is the mean over the chains that did not diverge, with its
standard error. See :func:`estimate_llc` for the conventions and how they map onto devinterp v1.
"""
from __future__ import annotations

import math
import time
import warnings
from dataclasses import dataclass, field
from typing import Callable, Sequence

import numpy as np
import pandas as pd
import torch
import torch.nn as nn

from ..utils import resolve_device
from torch.utils._pytree import tree_leaves

from .sampler import TensorBatches, make_batches, make_generator, sgld_sample


class LLCWarning(UserWarning):
    """A diverged chain, a negative estimate, or another sign that an LLC estimate is unreliable."""


def default_nbeta(batch_size: int) -> float:
    """devinterp v1's default inverse temperature ``m / ln m`` for SGLD batch size m (1 if m <= 1)."""
    return 1.0 if batch_size <= 1 else batch_size / math.log(batch_size)


@dataclass
class LLCResult:
    """One LLC estimate with everything needed to judge it.

    Arrays are NumPy. ``C`` chains, ``D`` draws, ``S = num_burnin_steps + D * num_steps_bw_draws`` steps.

    llc_mean, llc_std, llc_se: mean over the non-diverged chains of the per-chain estimates, their
        standard deviation (ddof=1, as devinterp v1's ``llc/std``) and the standard error ``std/sqrt(k)``.
    llc_per_chain: (C,) per-chain estimates (diverged chains included here, NaN if non-finite).
    diverged: (C,) True where the chain produced NaN/inf or its loss exploded (see ``max_loss_ratio``).
    init_loss: the loss at w* that every chain is compared with.
    loss_trace: (C, D) minibatch loss at each draw; ``llc_trace`` (C, D) the per-draw values
        ``nbeta * (loss - init_loss)`` (devinterp's OnlineLLCEstimator ``llc/trace``);
        ``llc_running`` (C, D) the running per-chain estimate after each draw.
    loss_trace_all: (C, S) the loss at every step, burn-in included.
    mala_accept: (C, S - 1) hypothetical MALA acceptance probability of every step, or None.
    chain_ids, hyperparams, elapsed_s: bookkeeping; ``steps_per_s`` counts chain-steps per second.
    """
    llc_mean: float
    llc_std: float
    llc_se: float
    llc_per_chain: np.ndarray
    diverged: np.ndarray
    init_loss: float
    loss_trace: np.ndarray
    llc_trace: np.ndarray
    llc_running: np.ndarray
    loss_trace_all: np.ndarray
    mala_accept: np.ndarray | None
    chain_ids: list
    hyperparams: dict
    elapsed_s: float
    warnings: list = field(default_factory=list)

    @property
    def num_ok(self) -> int:
        return int((~self.diverged).sum())

    @property
    def mala_mean(self) -> float:
        """Mean MALA acceptance over the non-diverged chains' draws (NaN if not computed)."""
        if self.mala_accept is None or self.num_ok == 0:
            return float("nan")
        return float(np.nanmean(self.mala_accept[~self.diverged]))

    @property
    def steps_per_s(self) -> float:
        return self.loss_trace_all.size / self.elapsed_s if self.elapsed_s > 0 else float("nan")

    def final_llc(self, last: int | None = None) -> float:
        """Mean over non-diverged chains of ``nbeta * (mean of the last ``last`` draws - init_loss)``.

        ``last=None`` uses all draws (= ``llc_mean``). This is the "final LLC" of a calibration cell:
        an average over the last draws, not one draw (cf. devinterp's EpsilonBetaAnalyzer bug).
        """
        if self.num_ok == 0:
            return float("nan")
        tail = self.llc_trace[~self.diverged]
        tail = tail if last is None else tail[:, -max(1, min(last, tail.shape[1])):]
        return float(tail.mean(1).mean())

    def summary(self) -> dict:
        """One flat row: estimate, uncertainty, diagnostics and hyperparameters."""
        return {"llc_mean": self.llc_mean, "llc_std": self.llc_std, "llc_se": self.llc_se,
                "num_chains_ok": self.num_ok, "num_diverged": int(self.diverged.sum()),
                "init_loss": self.init_loss, "mala_mean": self.mala_mean,
                "negative": bool(self.llc_mean < 0), **self.hyperparams, "elapsed_s": self.elapsed_s}

    def table(self) -> pd.DataFrame:
        """Tidy traces: one row per (chain, draw) with loss, per-draw llc and running llc."""
        C, D = self.loss_trace.shape
        return pd.DataFrame({
            "chain": np.repeat(self.chain_ids, D),
            "draw": np.tile(np.arange(D), C),
            "loss": self.loss_trace.ravel(),
            "llc": self.llc_trace.ravel(),
            "llc_running": self.llc_running.ravel(),
            "diverged": np.repeat(self.diverged, D),
        })

    def chains(self) -> pd.DataFrame:
        """One row per chain: its estimate and whether it diverged."""
        return pd.DataFrame({"chain": self.chain_ids, "llc": self.llc_per_chain, "diverged": self.diverged,
                             "mala_mean": (np.nanmean(self.mala_accept, 1) if self.mala_accept is not None
                                           and self.mala_accept.shape[1] else np.nan)})

    def to_devinterp(self) -> dict:
        """The keys of devinterp v1's ``estimate_learning_coeff_with_summary`` output."""
        out = {"llc/mean": self.llc_mean, "llc/std": self.llc_std, "loss/trace": self.loss_trace,
               "llc/trace": self.llc_trace, "init_loss": self.init_loss}
        out.update({f"llc-chain/{c}": v for c, v in zip(self.chain_ids, self.llc_per_chain)})
        if self.mala_accept is not None:
            out["mala_accept/trace"] = self.mala_accept
            out["mala_accept/mean"] = self.mala_mean
        return out

    def plot(self, kind: str = "llc_running", ax=None, true_llc: float | None = None):
        """Per-chain traces (see :func:`plateau_lib.llc.calibration.plot_traces`)."""
        from .calibration import plot_traces
        return plot_traces(self, kind=kind, ax=ax, true_llc=true_llc)


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
                 share_batches: bool = True, init_loss: float | None = None,
                 init_loss_batches: int | None = None, chain_ids: Sequence[int] | None = None,
                 device: str = "auto", mala: bool = False, max_loss_ratio: float = 10.0,
                 progress: bool = False, lr: float | None = None, localization: float | None = None,
                 warn: bool = True, compile: bool = False) -> LLCResult:
    """Estimate the local learning coefficient of ``model`` at its current weights w* with SGLD.

    Parameters (devinterp v1 names in brackets)
    ----------
    model: any ``nn.Module``; its ``requires_grad`` parameters are sampled, the others and buffers are
        held fixed. It is not modified, and is used in whatever train/eval mode it is in (devinterp v1
        calls ``model.train()``).
    loss_fn: ``loss_fn(model, batch) -> scalar tensor``, the *mean* loss on a batch [``evaluate``].
        During sampling ``model`` is a functional stand-in that calls the real module with the chain's
        weights, so ``model(x)`` and attribute access work as usual.
    data: a tensor or a tuple of tensors with a common first dimension n (batches are one seeded
        fancy-index each, without replacement within an epoch), or a callable
        ``sample_batch(generator) -> batch`` for online tasks [``loader``].
    epsilon: SGLD step size ε, > 0 [``lr``; default 1e-3, devinterp 0.01].
    nbeta: inverse temperature times n, > 0 [``nbeta``]; default ``m / ln m`` for batch size m, as
        devinterp v1 (``default_nbeta``). For callable data m is ``batch_size`` or, if None, the first
        dimension of a sampled batch.
    gamma: localization strength γ >= 0 [``localization``; default 100, devinterp 0].
    weight_decay: λ >= 0 in the drift term ``+ λ w`` [``weight_decay``].
    num_chains, num_draws: chains (>= 1, all run together) and recorded draws per chain (>= 1)
        [same names; devinterp defaults 10 and 100].
    num_burnin_steps: steps before the first draw, not recorded in the estimate; must be < num_draws.
        (devinterp v1 also excludes burn-in; v2 averages it in.)
    num_steps_bw_draws: SGLD steps per draw (>= 1). Draw k is the loss at step
        ``num_burnin_steps + k * num_steps_bw_draws``, before that step's update: with no burn-in draw 0
        is the loss at w* itself, as in devinterp v1.
    batch_size: SGLD batch size m for tensor data; None = full batch (the whole dataset every step).
    seed: everything random derives from it; the same seed gives the same noise and batches, so use
        one seed at every checkpoint of an LLC-over-training curve.
    share_batches: all chains see the same batch at each step (devinterp v2's default); False gives
        each chain its own batch stream (v1's behaviour). Ignored for full batch.
    init_loss: L(w*) if known; else computed under ``no_grad`` on ``init_loss_batches``: None = the
        whole tensor dataset in order (the exact L_n(w*); 16 seeded batches for callable data), k = k
        seeded random batches. One scalar is shared by all chains (as v1; v1 uses ``num_chains``
        random loader batches, v2 a per-chain mean over 32 batches).
    chain_ids: run exactly these chain indices (overrides ``num_chains``); chain c's numbers do not depend
        on which other chains run with it.
    device: 'auto', 'cpu', 'cuda', ... (model and data are copied there for sampling).
    mala: also record the hypothetical MALA acceptance probability of each step (devinterp's
        ``MalaAcceptanceRate``; aim for roughly 0.9, 0 or 1 are unhealthy).
    max_loss_ratio: a chain is marked diverged when any loss is NaN/inf or exceeds
        ``init_loss + max_loss_ratio * max(|init_loss|, D / (2 nbeta))`` (D = number of sampled weights).
    progress: show a tqdm bar over SGLD steps.
    lr, localization: devinterp spellings of ``epsilon`` and ``gamma`` (give one spelling, not both).
    warn: emit :class:`LLCWarning` for diverged chains and negative estimates (always recorded in
        ``result.warnings``).
    compile: ``torch.compile`` the batched gradient step (one-off compilation, tens of seconds on a
        CPU; see benchmarks/llc_bench.py for what it buys).

    Differences from devinterp v1: the std of ``llc/std`` is reported together with a standard error;
    diverged chains are excluded with a warning rather than stopping the run (v1 raises, v2 silently
    averages the finite steps); chains run as one batched computation; the default init loss is the
    full-data loss at w* rather than a few random batches; a standard error is reported.

    Returns an :class:`LLCResult`. Raises ``ValueError`` for invalid arguments before sampling.
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
    if not isinstance(model, nn.Module):
        raise ValueError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    if not any(p.requires_grad for p in model.parameters()):
        raise ValueError("model has no trainable parameters (requires_grad=True): there is nothing to sample")
    if not callable(loss_fn):
        raise ValueError("loss_fn must be callable as loss_fn(model, batch) -> scalar tensor")

    dev = resolve_device(device)
    batches = make_batches(data, batch_size, dev)
    init_gen = make_generator(seed, -1, "init", dev)
    model_dev = model if next(model.parameters()).device == dev else _moved_copy(model, dev)

    # loss at w* (also checks that loss_fn returns a scalar) and the default nbeta
    with torch.no_grad():
        if isinstance(batches, TensorBatches):
            first = next(iter(batches.init_batches(None, init_gen)))
            m = batches.batch_size
        else:
            first = data(make_generator(seed, -1, "init", dev))
            leaves = [x for x in tree_leaves(first) if isinstance(x, torch.Tensor)]
            m = batch_size if batch_size is not None else (leaves[0].shape[0] if leaves else 1)
        _loss_scalar(loss_fn, model_dev, first)
        if init_loss is None:
            total, weight = 0.0, 0
            for b in batches.init_batches(init_loss_batches, init_gen):
                size = tree_leaves(b)[0].shape[0]
                total = total + _loss_scalar(loss_fn, model_dev, b).double() * size
                weight += size
            init_loss = float(total / weight)
            if not math.isfinite(init_loss):
                raise ValueError(f"the loss at w* is not finite ({init_loss}); cannot estimate an LLC there")
    nbeta = default_nbeta(m) if nbeta is None else float(nbeta)

    num_steps = num_burnin_steps + num_draws * num_steps_bw_draws
    bar = None
    if progress:
        from tqdm.auto import tqdm
        from ..book import in_book_build
        bar = tqdm(total=num_steps, desc=f"SGLD {len(chain_ids)} chains", leave=False, disable=in_book_build())
    t0 = time.perf_counter()
    out = sgld_sample(model_dev, loss_fn, batches, epsilon=float(epsilon), nbeta=nbeta, gamma=float(gamma),
                      weight_decay=float(weight_decay), num_steps=num_steps, chain_ids=chain_ids, seed=int(seed),
                      share_batches=share_batches, device=dev, mala=mala, progress=bar,
                      compile=compile)
    elapsed = time.perf_counter() - t0
    if bar is not None:
        bar.close()

    hyper = {"epsilon": float(epsilon), "nbeta": nbeta, "gamma": float(gamma), "weight_decay": float(weight_decay),
             "num_chains": len(chain_ids), "num_draws": int(num_draws), "num_burnin_steps": int(num_burnin_steps),
             "num_steps_bw_draws": int(num_steps_bw_draws),
             "batch_size": None if getattr(batches, "full", False) else int(m), "seed": int(seed),
             "share_batches": bool(share_batches), "num_params": out["num_params"]}
    return summarize(out["loss"].double().numpy(), init_loss, hyper, chain_ids, elapsed,
                     None if out["mala"] is None else out["mala"].numpy(), max_loss_ratio, warn)


def _moved_copy(model, dev):
    import copy
    return copy.deepcopy(model).to(dev)


def summarize(loss_all: np.ndarray, init_loss: float, hyper: dict, chain_ids, elapsed: float,
              mala: np.ndarray | None = None, max_loss_ratio: float = 10.0, warn: bool = True) -> LLCResult:
    """Turn a (C, steps) loss trace into an :class:`LLCResult` (draw selection, divergence, warnings)."""
    nbeta, burn, bw, D = hyper["nbeta"], hyper["num_burnin_steps"], hyper["num_steps_bw_draws"], hyper["num_draws"]
    draws = loss_all[:, burn:burn + D * bw:bw]
    scale = max(abs(init_loss), hyper["num_params"] / (2 * nbeta))
    with np.errstate(invalid="ignore"):
        diverged = ~np.isfinite(loss_all).all(1) | (np.nan_to_num(loss_all, nan=np.inf).max(1)
                                                    > init_loss + max_loss_ratio * scale)
        llc_trace = nbeta * (draws - init_loss)
        llc_running = np.cumsum(llc_trace, axis=1) / np.arange(1, D + 1)
        per_chain = llc_trace.mean(1)
    per_chain = np.where(np.isfinite(per_chain), per_chain, np.nan)
    ok = per_chain[~diverged]
    notes = []
    if diverged.any():
        bad = [c for c, d in zip(chain_ids, diverged) if d]
        notes.append(f"{len(bad)} of {len(chain_ids)} chains diverged (NaN/inf or loss > init_loss + "
                     f"{max_loss_ratio} x {scale:.3g}) and are excluded: chains {bad}. Lower epsilon or raise gamma.")
    if len(ok) == 0:
        mean = std = se = float("nan")
        notes.append("every chain diverged: no LLC estimate")
    else:
        mean = float(ok.mean())
        std = float(ok.std(ddof=1)) if len(ok) > 1 else float("nan")
        se = std / math.sqrt(len(ok)) if len(ok) > 1 else float("nan")
        if mean < 0:
            notes.append(f"negative LLC estimate ({mean:.4g}): the chains found lower loss than at w*; w* is not a "
                         "local minimum at this nbeta, or epsilon is too large / gamma too small")
    if warn:
        for note in notes:
            warnings.warn(note, LLCWarning, stacklevel=3)
    return LLCResult(llc_mean=mean, llc_std=std, llc_se=se, llc_per_chain=per_chain, diverged=diverged,
                     init_loss=float(init_loss), loss_trace=draws, llc_trace=llc_trace, llc_running=llc_running,
                     loss_trace_all=loss_all, mala_accept=mala, chain_ids=list(chain_ids), hyperparams=hyper,
                     elapsed_s=elapsed, warnings=notes)
