"""An LLC estimate and its summaries: :class:`LLCResult`, built from the loss traces by :func:`summarize`.

No matplotlib here (figures are in plots.py), and nothing that samples: this module only reads traces.

The divergence rule (:func:`diverged_chains`). A chain is *diverged*, excluded from the estimate and
named in a warning, when

1. any of its losses is NaN or infinite; or
2. it **ran away**: with at least 3 finite chains, its λ̂ lies above the median chain's by more than
   ``runaway_sds`` robust standard deviations of the per-chain λ̂ (1.4826 × their median absolute
   deviation), the deviation being at least ``0.1 × max(|median λ̂|, 1)`` (so that chains that agree
   closely by chance do not flag a healthy neighbour). Only upward: a chain that finds *lower* loss
   has escaped, which the negative-estimate warning reports; or
3. its loss exceeds ``L(w*) + max_loss_ratio × max(|L(w*)|, D / (2 nβ))`` at some step: beyond the
   regular model's bound λ ≤ D/2 by the factor ``max_loss_ratio``. Loose, but it needs no other chain.

Rule 2 is what catches a runaway chain on a real model, where rule 3's bound is thousands of nats
above L(w*); it needs other chains to compare with, so run at least 3 (4 is the default).
"""
from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

RUNAWAY_SDS = 5.0  # rule 2: robust standard deviations above the median chain
MAX_LOSS_RATIO = 10.0  # rule 3
MAD_TO_SD = 1.4826  # a normal distribution's standard deviation per median absolute deviation
MIN_SPREAD = 0.1  # rule 2's floor on the spread, a fraction of max(|median λ̂|, 1)


class LLCWarning(UserWarning):
    """A diverged chain, a negative estimate, or another sign that an LLC estimate is unreliable."""


@dataclass
class LLCResult:
    """One LLC estimate with everything needed to judge it.

    Arrays are NumPy. ``C`` chains, ``D`` draws, ``S = num_burnin_steps + D * num_steps_bw_draws`` steps.

    llc_mean, llc_std, llc_se: mean over the non-diverged chains of the per-chain estimates, their
        standard deviation (ddof=1, as devinterp v1's ``llc/std``) and the standard error ``std/sqrt(k)``.
        The standard error is honest when the chains are independent: each has its own batches
        (``share_batches=False``, the default) or every step is full batch (``independent_chains``).
        With shared batches every chain carries the same batch noise, which the spread between chains
        does not see, so ``llc_se`` understates the error of the mean.
    llc_per_chain: (C,) per-chain estimates (diverged chains included here, NaN if non-finite).
    diverged: (C,) True where the chain diverged (NaN/inf, ran away, or exploded: see the module docstring).
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
    def independent_chains(self) -> bool:
        """True when no two chains share batches (own batch streams, or full batch): ``llc_se`` is honest."""
        return not self.hyperparams.get("share_batches", False) or self.hyperparams.get("batch_size") is None

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
                "negative": bool(self.llc_mean < 0), "independent_chains": self.independent_chains,
                **self.hyperparams, "elapsed_s": self.elapsed_s}

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


def diverged_chains(loss_all: np.ndarray, per_chain: np.ndarray, init_loss: float, bound_scale: float,
                    max_loss_ratio: float = MAX_LOSS_RATIO, runaway_sds: float = RUNAWAY_SDS) -> np.ndarray:
    """(C,) the chains that diverged by the rule of the module docstring.

    loss_all: (C, S) every step's loss; per_chain: (C,) the per-chain λ̂; bound_scale: ``max(|L(w*)|,
    D / (2 nβ))`` of rule 3.
    """
    with np.errstate(invalid="ignore"):
        bad = ~np.isfinite(loss_all).all(1) | ~np.isfinite(per_chain)
        bad |= np.nan_to_num(loss_all, nan=np.inf).max(1) > init_loss + max_loss_ratio * bound_scale
    finite = per_chain[np.isfinite(per_chain)]
    if len(finite) >= 3:
        median = np.median(finite)
        spread = max(MAD_TO_SD * np.median(np.abs(finite - median)), MIN_SPREAD * max(abs(median), 1.0))
        with np.errstate(invalid="ignore"):
            bad |= per_chain > median + runaway_sds * spread
    return bad


def summarize(loss_all: np.ndarray, init_loss: float, hyper: dict, chain_ids, elapsed: float,
              mala: np.ndarray | None = None, max_loss_ratio: float = MAX_LOSS_RATIO,
              runaway_sds: float = RUNAWAY_SDS, warn: bool = True) -> LLCResult:
    """Turn a (C, steps) loss trace into an :class:`LLCResult` (draw selection, divergence, warnings)."""
    nbeta, burn, bw, D = hyper["nbeta"], hyper["num_burnin_steps"], hyper["num_steps_bw_draws"], hyper["num_draws"]
    draws = loss_all[:, burn:burn + D * bw:bw]
    scale = max(abs(init_loss), hyper["num_params"] / (2 * nbeta))
    with np.errstate(invalid="ignore", over="ignore"):
        llc_trace = nbeta * (draws - init_loss)
        llc_running = np.cumsum(llc_trace, axis=1) / np.arange(1, D + 1)
        per_chain = llc_trace.mean(1)
    per_chain = np.where(np.isfinite(per_chain), per_chain, np.nan)
    diverged = diverged_chains(loss_all, per_chain, init_loss, scale, max_loss_ratio, runaway_sds)
    ok = per_chain[~diverged]
    notes = []
    if diverged.any():
        bad = [c for c, d in zip(chain_ids, diverged) if d]
        notes.append(f"{len(bad)} of {len(chain_ids)} chains diverged (a loss that is not finite, λ̂ more than {runaway_sds:g} "
                     f"robust SDs above the median chain, or a loss above L(w*) + {max_loss_ratio:g} × {scale:.3g}) and are "
                     f"excluded: chains {bad}. Lower epsilon or raise gamma.")
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


def combine(results: list, warn: bool = True) -> LLCResult:
    """The chains of several results of one model (same L(w*) and draw schedule) as one result, judged
    together: how a chain run with other settings (e.g. a planted too-large ε) compares with the rest.

    Hyperparameters are the first result's; chain ids are renumbered 0..C-1 in order.
    """
    first = results[0]
    loss = np.concatenate([r.loss_trace_all for r in results])
    mala = None if any(r.mala_accept is None for r in results) else np.concatenate([r.mala_accept for r in results])
    hyper = {**first.hyperparams, "num_chains": len(loss)}
    return summarize(loss, first.init_loss, hyper, list(range(len(loss))), sum(r.elapsed_s for r in results), mala,
                     hyper.get("max_loss_ratio", MAX_LOSS_RATIO), hyper.get("runaway_sds", RUNAWAY_SDS), warn)


def converged(res: LLCResult, frac: float = 0.25) -> bool:
    """Heuristic: the mean of the last ``frac`` of draws is within max(2 SE, 5 %) of the preceding ``frac``."""
    ok = ~res.diverged
    D = res.llc_trace.shape[1]
    k = max(1, int(D * frac))
    if ok.sum() == 0 or D < 2 * k:
        return False
    last = res.llc_trace[ok, -k:].mean(1)
    prev = res.llc_trace[ok, -2 * k:-k].mean(1)
    diff = last - prev
    se = diff.std(ddof=1) / math.sqrt(len(diff)) if len(diff) > 1 else abs(diff.mean())
    return bool(abs(diff.mean()) <= max(2 * se, 0.05 * abs(last.mean())))


def traces_table(results: dict, kind: str = "llc_running") -> pd.DataFrame:
    """Long tidy table of traces for many results keyed by (epsilon, nbeta, gamma) or any label."""
    frames = []
    for key, res in results.items():
        t = res.table()[["chain", "draw", kind, "diverged"]].rename(columns={kind: "value"})
        t["cell"] = str(key)
        frames.append(t)
    return pd.concat(frames, ignore_index=True)
