"""Calibrating SGLD hyperparameters: a sweep over (epsilon, nbeta, gamma) and trace plots.

The "final LLC" of a cell is the mean over chains of ``nbeta * (mean of the last ``last_draws`` draws
- init_loss)``: an average over the last draws, never a single draw (devinterp's EpsilonBetaAnalyzer
reads ``x[:, -N]``, one draw). What to look for: traces that flatten (converged), stay above 0 (no
escape to lower loss), no divergence, MALA acceptance near 0.9, and a final LLC that is flat in ε.
"""
from __future__ import annotations

import itertools
import math
import warnings
from typing import Callable, Sequence

import matplotlib.pyplot as plt
import pandas as pd
import seaborn as sns
from tqdm.auto import tqdm

from ..plots import PAGE_WIDTH
from .estimator import LLCResult, LLCWarning, estimate_llc

TRACE_LABELS = {"llc_running": "running λ̂ (per chain)", "llc": "per-draw nβ·(L − L(w*))",
                "loss": "minibatch loss L (nats)"}


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


def sweep_row(res: LLCResult, last_draws: int) -> dict:
    return {"epsilon": res.hyperparams["epsilon"], "nbeta": res.hyperparams["nbeta"],
            "gamma": res.hyperparams["gamma"], "llc_final": res.final_llc(last_draws), "llc_mean": res.llc_mean,
            "llc_se": res.llc_se, "num_diverged": int(res.diverged.sum()), "mala_mean": res.mala_mean,
            "negative": bool(res.final_llc(last_draws) < 0), "converged": converged(res),
            "elapsed_s": res.elapsed_s}


def calibration_sweep(model, loss_fn: Callable, data, *, epsilons: Sequence[float], nbetas: Sequence[float | None],
                      gammas: Sequence[float], last_draws: int | None = None, progress: bool = True,
                      **llc_kwargs) -> tuple[pd.DataFrame, dict]:
    """Run :func:`estimate_llc` on every (epsilon, nbeta, gamma) cell with the same seed.

    last_draws: draws averaged into ``llc_final`` (default: the last quarter of ``num_draws``).
    llc_kwargs: everything else for :func:`estimate_llc` (num_chains, num_draws, batch_size, seed, mala...).
    Returns ``(table, results)``: a tidy DataFrame with one row per cell (epsilon, nbeta, gamma,
    llc_final, llc_mean, llc_se, num_diverged, mala_mean, negative, converged, elapsed_s) and
    ``{(epsilon, nbeta, gamma): LLCResult}``. Warnings of individual cells are collected in the results
    (``res.warnings``), not printed.
    """
    cells = list(itertools.product(epsilons, nbetas, gammas))
    if not cells:
        raise ValueError("epsilons, nbetas and gammas must each hold at least one value")
    num_draws = llc_kwargs.get("num_draws", 200)
    last = max(1, num_draws // 4) if last_draws is None else int(last_draws)
    rows, results = [], {}
    from ..book import in_book_build
    for eps, nb, gam in tqdm(cells, desc="calibration sweep", disable=not progress or in_book_build()):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", LLCWarning)
            res = estimate_llc(model, loss_fn, data, epsilon=eps, nbeta=nb, gamma=gam, **llc_kwargs)
        results[(eps, nb, gam)] = res
        rows.append(sweep_row(res, last))
    return pd.DataFrame(rows), results


def middle_epsilon(epsilons: Sequence[float]) -> float:
    """The middle of the distinct step sizes of a sweep grid (the upper middle for an even count)."""
    values = sorted({float(e) for e in epsilons})
    if not values:
        raise ValueError("epsilons is empty")
    return values[len(values) // 2]


def traces_table(results: dict, kind: str = "llc_running") -> pd.DataFrame:
    """Long tidy table of traces for many results keyed by (epsilon, nbeta, gamma) or any label."""
    frames = []
    for key, res in results.items():
        t = res.table()[["chain", "draw", kind, "diverged"]].rename(columns={kind: "value"})
        t["cell"] = str(key)
        frames.append(t)
    return pd.concat(frames, ignore_index=True)


def plot_traces(res: LLCResult, kind: str = "llc_running", ax=None, true_llc: float | None = None, title=None,
                legend: bool = True):
    """Per-chain traces of ``kind`` ('llc_running', 'llc' or 'loss'); diverged chains dashed, mean in black."""
    if kind not in TRACE_LABELS:
        raise ValueError(f"kind must be one of {sorted(TRACE_LABELS)}, got {kind!r}")
    if ax is None:
        _, ax = plt.subplots(figsize=(PAGE_WIDTH, 3.2))
    table = res.table()
    ok = table[~table.diverged]
    if len(ok):
        sns.lineplot(data=ok, x="draw", y=kind, hue="chain", palette="crest", legend=False, lw=0.8, ax=ax,
                     estimator=None, units="chain")
        mean = ok.groupby("draw")[kind].mean()
        ax.plot(mean.index, mean.values, color="black", lw=1.6, label="mean over chains")
    bad = table[table.diverged]
    for _, chain in bad.groupby("chain"):
        ax.plot(chain.draw, chain[kind], ls="--", color="tab:red", lw=0.8)
    if len(bad):
        ax.plot([], [], ls="--", color="tab:red", label="diverged chain")
    if kind == "loss":
        ax.axhline(res.init_loss, color="tab:orange", ls=":", label="L(w*)")
    elif true_llc is not None:
        ax.axhline(true_llc, color="tab:orange", ls=":", label=f"true λ = {true_llc:.3g}")
    else:
        ax.axhline(0, color="grey", lw=0.5)
    hp = res.hyperparams
    ax.set_title(title or f"ε = {hp['epsilon']:.0e}, nβ = {hp['nbeta']:.3g}, γ = {hp['gamma']:.3g}: "
                          f"λ̂ = {res.llc_mean:.3g} ± {res.llc_se:.2g}")
    ax.set_xlabel("draw (SGLD steps after burn-in)")
    ax.set_ylabel(TRACE_LABELS[kind])
    if legend:
        ax.legend(loc="best")
    return ax.figure


def plot_sweep(table: pd.DataFrame, true_llc: float | None = None, value: str = "llc_final"):
    """Final λ̂ against ε (log axis), one line per nβ, one panel per γ in rows of two; cells with
    diverged chains marked ×."""
    t = table.copy()
    t["nβ"] = t["nbeta"].map(lambda v: f"{v:.3g}")
    gammas = list(dict.fromkeys(t["gamma"]))
    ncols = min(2, len(gammas))
    nrows = -(-len(gammas) // ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(PAGE_WIDTH, 3.0 * nrows), squeeze=False)
    for ax in axes.flat[len(gammas):]:
        ax.set_visible(False)
    for gam, ax in zip(gammas, axes.flat):
        part = t[t["gamma"] == gam]
        sns.lineplot(data=part, x="epsilon", y=value, hue="nβ", marker="o", ax=ax, palette="deep")
        bad = part[part.num_diverged > 0]
        ax.scatter(bad.epsilon, bad[value].fillna(0), marker="x", color="tab:red", zorder=5,
                   label="diverged chains" if len(bad) else None)
        if true_llc is not None:
            ax.axhline(true_llc, color="tab:orange", ls=":")
        ax.set_xscale("log")
        ticks = sorted(part["epsilon"].unique())
        ax.set_xticks(ticks, [f"{e:.0e}" for e in ticks])
        ax.set_xticks([], minor=True)
        ax.set(xlabel="SGLD step size ε", ylabel="final λ̂ (mean of last draws)", title=f"γ = {gam:.3g}")
        ax.legend(title="nβ", loc="best")
    return fig


def sweep_figures(results: dict, kind: str = "llc_running") -> dict:
    """One trace figure per sweep cell, labelled 'ε=…, nβ=…, γ=…' (for a precomputed widget)."""
    figs = {}
    for (eps, nb, gam), res in results.items():
        fig = plot_traces(res, kind=kind)
        figs[f"ε={eps:.0e}, nβ={res.hyperparams['nbeta']:.3g}, γ={gam:.3g}"] = fig
        plt.close(fig)
    return figs
