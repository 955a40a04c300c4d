"""Figures of LLC estimates: per-chain traces, calibration sweeps and the LLC page's panels, drawn for the
book's text column (``PAGE_WIDTH`` inches, panels in rows of two). Reads results; samples nothing."""
from __future__ import annotations

import matplotlib.pyplot as plt
import pandas as pd
import seaborn as sns
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from plateau_lib.book.plots import PAGE_WIDTH
from plateau_lib.llc.result import LLCResult

TRACE_LABELS = {"llc_running": "running λ̂ (per chain)", "llc": "per-draw nβ·(L − L(w*))",
                "loss": "minibatch loss L (nats)"}


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


GOLDEN_SHOWN = ("λ̂ ÷ λ, polynomial (0, 3)", "λ̂ ÷ λ, polynomial (1, 2), a hard case",
                "λ̂ ÷ λ, reduced-rank regression 5,3,5", "λ̂ ÷ λ, regular model d = 10")


def plot_golden_traces(estimates, metrics=GOLDEN_SHOWN, height: float = 2.8):
    """Running λ̂ of each chain against the exact λ, for the golden estimates whose claim metric is in
    ``metrics`` (two panels per row)."""
    shown = [e for e in estimates if e.metric in metrics]
    if not shown:
        raise ValueError(f"no golden estimate has a metric in {metrics!r}")
    ncols = min(2, len(shown))
    nrows = -(-len(shown) // ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(PAGE_WIDTH, height * nrows), squeeze=False)
    for ax in axes.flat[len(shown):]:
        ax.set_visible(False)
    for i, (ax, e) in enumerate(zip(axes.flat, shown)):
        plot_traces(e.result, ax=ax, true_llc=e.true_lambda, legend=i == 0,
                    title=f"{e.label}: λ̂ {e.result.llc_mean:.3g}, λ {e.true_lambda:.3g}")
        if i % ncols:
            ax.set_ylabel("")
        if i < len(shown) - ncols:
            ax.set_xlabel("")
    return fig


def plot_failure_modes(results: dict, height: float = 2.5):
    """One row per failure case: its loss trace against L(w*) (left) and its running λ̂ (right).

    A loss that explodes (a case with diverged chains) is drawn on a log axis."""
    fig = plt.figure(figsize=(PAGE_WIDTH, height * len(results)))
    rows = fig.subfigures(len(results), 1)
    for i, (row, (name, res)) in enumerate(zip(rows if len(results) > 1 else [rows], results.items())):
        left, right = row.subplots(1, 2)
        plot_traces(res, kind="loss", ax=left, title="minibatch loss")
        plot_traces(res, kind="llc_running", ax=right, title="running λ̂", legend=False)
        if res.diverged.any():
            left.set_yscale("log")
        left.set_ylabel("loss (nats)")
        right.set_ylabel("λ̂ (per chain)")
        if i < len(results) - 1:
            left.set_xlabel("")
            right.set_xlabel("")
        row.suptitle(name)
    return fig


def plot_llc_over_training(curve: pd.DataFrame, ax=None):
    """λ̂ (mean over chains, ± SE band) against training step, one line per ``seeding``."""
    if ax is None:
        _, ax = plt.subplots(figsize=(PAGE_WIDTH, 3.2))
    order = list(dict.fromkeys(curve["seeding"]))
    colors = dict(zip(order, sns.color_palette(n_colors=len(order))))
    sns.lineplot(data=curve, x="step", y="llc_mean", hue="seeding", hue_order=order, palette=colors, marker="o",
                 ax=ax)
    for name in order:
        part = curve[curve["seeding"] == name].sort_values("step")
        ax.fill_between(part.step, part.llc_mean - part.llc_se, part.llc_mean + part.llc_se, alpha=0.15,
                        color=colors[name], lw=0)
    ax.set(xlabel="training step", ylabel="λ̂ (mean over chains, ± SE)", title="LLC over training, estimated online")
    ax.legend(title=None)
    return ax.figure


def plot_dln(sweeps: dict, band: tuple = (0.9, 1.1), names: dict | None = None):
    """λ̂ ÷ λ of the deep linear networks against their number of weights d, for each sweep of ``sweeps`` (``{label:
    per-chain rows}``, drawn solid, dashed, …): one point per chain, a line through each sampler's chain means
    (``names``: the samplers' names in the legend), the exact λ at 1 and the ± band."""
    fig, ax = plt.subplots(figsize=(PAGE_WIDTH, 3.8))
    ax.axhspan(*band, color="tab:green", alpha=0.12, label=f"{band[0]:g}–{band[1]:g} × λ")
    ax.axhline(1.0, color="black", lw=0.8, ls=":")
    ok = pd.concat([chains.assign(sweep=label) for label, chains in sweeps.items()], ignore_index=True)
    ok = ok[~ok["diverged"].astype(bool)]
    ok = ok.assign(sampler=ok["sampler"].map(names or {}).fillna(ok["sampler"]))
    means = ok.groupby(["sweep", "sampler", "d"], as_index=False, sort=False)["λ̂ ÷ λ"].mean()
    samplers = list(dict.fromkeys(ok["sampler"]))
    colours = dict(zip(samplers, sns.color_palette(n_colors=len(samplers))))
    dashes = dict(zip(sweeps, ["", (4, 2), (1, 1.5)]))
    sns.lineplot(data=means, x="d", y="λ̂ ÷ λ", hue="sampler", palette=colours, style="sweep", dashes=dashes,
                 marker="o", legend=False, ax=ax)
    sns.scatterplot(data=ok, x="d", y="λ̂ ÷ λ", hue="sampler", palette=colours, s=14, alpha=0.5, legend=False, ax=ax)
    keys = [Patch(color="tab:green", alpha=0.12, label=f"{band[0]:g}–{band[1]:g} × λ")]
    keys += [Line2D([], [], color=c, marker="o", label=name) for name, c in colours.items()]
    if len(sweeps) > 1:
        keys += [Line2D([], [], color="0.35", dashes=dashes[label] or (None, None), label=label) for label in sweeps]
    ax.set_xscale("log")
    ax.set(xlabel="weights d (log scale)", ylabel="λ̂ ÷ λ (Aoyagi's exact λ)")
    ax.legend(handles=keys, loc="upper left")
    return fig


def plot_settling(windows: pd.DataFrame, band: tuple = (0.9, 1.1), rmsprop: pd.DataFrame | None = None):
    """The γ scan of the deep linear networks (``dln.gamma_rows`` windows): λ̂ ÷ λ over each window of a chain's
    steps, one panel per size (log step axis, since the chains at each γ run for their own τ), one colour per γ
    (the chains' mean; burn-in windows faded), with the exact λ at 1 and the ± band; ``rmsprop``: the same scan with
    RMSProp-SGLD, dashed."""
    scans = {"-": windows} if rmsprop is None else {"-": windows, "--": rmsprop}
    means = {style: scan[~scan["diverged"].astype(bool)].groupby(["d", "γ", "step"], as_index=False).agg(
        **{"λ̂ ÷ λ": ("window λ̂ ÷ λ", "mean"), "burn-in": ("burn-in", "first")}) for style, scan in scans.items()}
    sizes = sorted(means["-"]["d"].unique())
    gammas = sorted(means["-"]["γ"].unique())
    colours = dict(zip(gammas, sns.color_palette("viridis", n_colors=len(gammas))))
    fig, axes = plt.subplots(1, len(sizes), figsize=(PAGE_WIDTH, 3.6), sharey=True, squeeze=False, layout="constrained")
    for ax, d in zip(axes[0], sizes):
        ax.axhspan(*band, color="tab:green", alpha=0.12)
        ax.axhline(1.0, color="black", lw=0.8, ls=":")
        for style, scan in means.items():
            for g in gammas:
                one = scan[(scan["d"] == d) & (scan["γ"] == g)]
                burn, draws = one[one["burn-in"].astype(bool)], one[~one["burn-in"].astype(bool)]
                ax.plot(burn["step"] + 1, burn["λ̂ ÷ λ"], color=colours[g], alpha=0.35, ls=style)
                ax.plot(draws["step"] + 1, draws["λ̂ ÷ λ"], color=colours[g], ls=style)
        ax.set_xscale("log")
        ax.set(title=f"d = {d:,}", xlabel="SGLD step (log scale)")
    axes[0][0].set_ylabel("λ̂ ÷ λ over 1,000 steps")
    keys = [Patch(color="tab:green", alpha=0.12, label=f"{band[0]:g}–{band[1]:g} × λ")]
    keys += [Line2D([], [], color=c, label=f"γ = {g:g}") for g, c in colours.items()]
    keys += [Line2D([], [], color="0.35", alpha=0.35, label="burn-in")]
    if rmsprop is not None:
        keys += [Line2D([], [], color="0.2", ls=s, label=n) for s, n in (("-", "SGLD"), ("--", "RMSProp-SGLD"))]
    fig.legend(handles=keys, loc="outside lower center", ncol=len(keys))
    return fig
