"""The figures of the task-diversity chapters (``transient_ridge``, ``task_diversity``): Carroll Figs. 1 and 3,
Raventós Fig. 2, the calibration, the widgets' frames, and ``show_stored``, which draws a stored sweep's figures by
their names in ``FIGURES``. The sweeps, tables and verdict values are in ``diversity_page``."""
from __future__ import annotations

import matplotlib as mpl
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns

from plateau_lib.book.plots import PAGE_WIDTH, condition_colours, legend_below, paper_span
from plateau_lib.engine import trajectory
from plateau_lib.icl import diversity as div, presets as icl_presets
from plateau_lib.icl.diversity_page import (LABELS, M_position, PAPER_D, PAPER_DMMSE_UP_TO, PAPER_SWITCH_RANGE, Sweep,
                                           pca_of, transient_Ms, transients)


def palette(Ms) -> dict:
    """One colour per M (``plots.condition_colours``, in M's order), ∞ in black."""
    finite = sorted(M for M in set(Ms) if M != icl_presets.INF)
    colours = condition_colours(len(finite))
    out = {M: colours[i] for i, M in enumerate(finite)}
    out[icl_presets.INF] = (0.0, 0.0, 0.0)
    return out


def _log_y(ax):
    """A log y-axis with labels: 1-2-5 ticks when the drawn range spans under two decades (else decades only)."""
    ax.set_yscale("log")
    lo, hi = ax.get_ylim()
    if hi / lo < 100:
        ax.yaxis.set_major_locator(mpl.ticker.LogLocator(subs=(1.0, 2.0, 5.0)))
        ax.yaxis.set_major_formatter(mpl.ticker.FormatStrFormatter("%.2g"))
    ax.yaxis.set_minor_formatter(mpl.ticker.NullFormatter())


def _log_step(ax):
    ax.set_xscale("symlog", linthresh=10)
    ax.set_xlabel("step")


def curves_figure(s: Sweep, title: str = ""):
    """Carroll Fig. 1 (top and bottom left): the OOD loss over training for every M, t_M^crit circled where the
    page's rule finds a transient (``transients``), each M's dMMSE OOD loss dashed, ridge's dotted; then Δ to
    dMMSE_M and to ridge on q_M."""
    c, colours = s.curves, palette(s.curves["M"])
    fig, ax = plt.subplot_mosaic([["ood", "ood"], ["dmmse", "ridge"]], figsize=(PAGE_WIDTH, 6.2))
    axes = [ax["ood"], ax["dmmse"], ax["ridge"]]
    for (M, seed), g in c.groupby(["M", "seed"]):
        kw = dict(color=colours[M], lw=1.5, label=div.label_M(M) if seed == c["seed"].min() else None)
        axes[0].plot(g["step"], g["ood_loss"], **kw)
        axes[1].plot(g["step"], g["delta_dmmse"], **kw)
        axes[2].plot(g["step"], g["delta_ridge"], **kw)
        if M != icl_presets.INF:
            axes[0].axhline(g["ood_dmmse"].iloc[-1], color=colours[M], ls="--", lw=0.8)
    axes[0].axhline(c["ood_ridge"].iloc[-1], color="crimson", ls=":", lw=1.5, label="ridge")
    rule = transients(s)
    for M in transient_Ms(s):
        axes[0].plot(rule.loc[M, "t_crit"], rule.loc[M, "min_ood_loss"], "o", mfc="none", mec=colours[M], ms=9, mew=1.8)
    names = ("OOD loss on Gaussian tasks (○ t$_M^{crit}$ of a transient; dashed: dMMSE$_M$'s, dotted: ridge's)",
             "Δ to dMMSE$_M$ (on $q_M$)", "Δ to ridge (on $q_M$)")
    for a, name in zip(axes, names):
        _log_step(a)
        a.set_title(name)
    for a in axes[1:]:  # distances span decades; the OOD loss does not
        _log_y(a)
    axes[0].set_ylabel("loss per token")
    axes[1].set_ylabel("Δ per token")
    axes[0].legend(title="M", loc="center left", bbox_to_anchor=(1.01, 0.5))
    if title:
        fig.suptitle(title)
    return fig


def pca_figure(s: Sweep, n_components: int = 2, smooth_window: int = 3, title: str = ""):
    """Carroll Fig. 1 (right): every run's trajectory in the PC1-PC2 plane of the joint PCA (lightly smoothed,
    start ○, end ●), with the dMMSE_M predictors (★, M's colour) and ridge (✕) projected, not fitted."""
    pca, proj, pred = pca_of(s, n_components)
    colours = palette(s.curves["M"])
    fig, ax = plt.subplots(figsize=(PAGE_WIDTH * 0.75, 4.6))
    for (M, seed), g in proj.groupby("label", sort=False):
        xy = trajectory.smooth(g[["PC1", "PC2"]].to_numpy(), smooth_window)
        ax.plot(xy[:, 0], xy[:, 1], color=colours[M], lw=1.4, label=div.label_M(M) if seed == 0 else None)
        ax.plot(*xy[0], "o", mfc="white", mec=colours[M], ms=5)
        ax.plot(*xy[-1], "o", color=colours[M], ms=6)
    for (kind, M), row in pred.iterrows():
        if kind == "ridge":
            ax.plot(row["PC1"], row["PC2"], "X", color="crimson", ms=11, mec="white", label="ridge")
        elif M in colours:
            ax.plot(row["PC1"], row["PC2"], "*", color=colours[M], ms=13, mec="k", mew=0.6)
    ratio = pca.explained_variance_ratio
    ax.set_xlabel(f"PC1 ({ratio[0]:.1%} of the variance)")
    ax.set_ylabel(f"PC2 ({ratio[1]:.1%})")
    ax.legend(title="M  (★ dMMSE$_M$)", loc="center left", bbox_to_anchor=(1.01, 0.5))
    ax.set_title(title or "Joint trajectory PCA of the predictions on root-task sequences")
    return fig


def llc_figure(s: Sweep, title: str = ""):
    """Carroll Fig. 3: against M, the final models' loss on q_M beside dMMSE_M's and ridge's, and λ̂ of every
    final model (± SE over chains) with λ̂ at M = ∞ as a line; at the paper's D, the M where Carroll et al.'s
    models switch from dMMSE_M to ridge (``PAPER_SWITCH_RANGE``) shaded in the paper's colour."""
    Ms = sorted({M for M, _ in s.configs})
    ideal = s.ideal().reindex(Ms)
    finite = [M for M in Ms if M != icl_presets.INF]
    x = {M: i for i, M in enumerate(Ms)}
    fig, axes = plt.subplots(1, 2, figsize=(PAGE_WIDTH, 3.6), layout="constrained")
    ax = axes[0]
    ax.plot([x[M] for M in Ms], ideal["loss_dmmse"], "s--", color="tab:blue", label="dMMSE$_M$")
    ax.plot([x[M] for M in Ms], ideal["loss_ridge"], "^:", color="tab:red", label="ridge")
    fin = s.final.groupby("M")["id_loss"].mean()
    ax.plot([x[M] for M in fin.index], fin.to_numpy(), "o-", color="k", label="trained model")
    ax.set_ylabel("loss on $q_M$")
    ax.legend()
    if next(iter(s.configs.values())).task_kwargs["D"] == PAPER_D:
        paper_span(ax, *(M_position(Ms, M) for M in PAPER_SWITCH_RANGE), "switch, M = 182–362")
    ax = axes[1]
    if s.llc_table is not None:
        t = s.llc_table.groupby("M").agg(llc=("llc_mean", "mean"), se=("llc_se", "mean")).reindex(Ms)
        ax.errorbar([x[M] for M in finite], t.loc[finite, "llc"], yerr=t.loc[finite, "se"], fmt="o-", color="k",
                    capsize=3, label="final model")
        if icl_presets.INF in t.index:
            ax.axhline(t.loc[icl_presets.INF, "llc"], color="crimson", ls="--", label="λ̂ at M = ∞")
            ax.errorbar([x[icl_presets.INF]], [t.loc[icl_presets.INF, "llc"]], yerr=[t.loc[icl_presets.INF, "se"]], fmt="o", color="crimson",
                        capsize=3)
        ax.set_ylabel("λ̂ (final weights)")
        ax.legend()
    else:
        ax.text(0.5, 0.5, "no LLC table stored", ha="center", transform=ax.transAxes)
    for ax in axes:
        M_ticks(ax, Ms, every=1 if len(Ms) <= 8 else 2)
        ax.set_xlabel("M (pretraining tasks)")
    return legend_below(fig, axes[0], title=title)


def llc_over_training_figure(s: Sweep, llc: pd.DataFrame, title: str = ""):
    """Carroll et al.'s question over training: for the runs of ``llc`` (``diversity.llc_over_training``: one
    row per M, seed and checkpoint), their OOD loss (top, t_crit of the sweep's rule as a dotted line) and λ̂
    at each checkpoint ± SE (bottom), with λ̂ of the sweep's M = ∞ model at the end of training dashed."""
    colours = palette(s.curves["M"])
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(PAGE_WIDTH, 5.6), sharex=True)
    rule = transients(s)
    for (M, seed), g in llc.sort_values("step").groupby(["M", "seed"]):
        c = s.curves[(s.curves["M"] == M) & (s.curves["seed"] == seed)]
        label = f"M = {div.label_M(M)}" + ("" if llc["seed"].nunique() == 1 else f", seed {seed}")
        top.plot(c["step"], c["ood_loss"], color=colours[M], lw=1.4, label=label)
        bottom.errorbar(g["step"], g["llc_mean"], yerr=g["llc_se"], fmt="o-", color=colours[M], capsize=3)
        if M in rule.index and bool(rule.loc[M, "transient"]):
            for ax in (top, bottom):
                ax.axvline(float(rule.loc[M, "t_crit"]), color=colours[M], ls=":", lw=1.2)
    if s.llc_table is not None and icl_presets.INF in set(s.llc_table["M"]):
        bottom.axhline(s.llc_table.loc[s.llc_table["M"] == icl_presets.INF, "llc_mean"].mean(), color="crimson",
                       ls="--", label="λ̂ at M = ∞ (end of training)")
        bottom.legend(loc="upper left")
    top.set_ylabel("OOD loss")
    top.legend(loc="center left", bbox_to_anchor=(1.01, 0.5))
    bottom.set_ylabel("λ̂ at the checkpoint")
    for ax in (top, bottom):
        ax.set_xscale("log")
    top.set_xlim(left=100)  # nothing moves before step 100
    bottom.set_xlabel("step (dotted: tᶜʳⁱᵗ of the seed-mean curve)")
    if title:
        fig.suptitle(title)
    return fig


def diversity_figure(s: Sweep, title: str = ""):
    """Raventós Fig. 2 in miniature, against M: (left) the final model's loss beside dMMSE_M's and ridge's,
    (middle) Δ(PT, dMMSE_M), (right) Δ(PT, ridge); top row on the pretraining tasks (q_M), bottom row on
    Gaussian tasks (𝒯_True). Everything per token and divided by D (their Eq. 4). At the paper's D, the M up to
    which Raventós et al.'s PT tracks dMMSE (``PAPER_DMMSE_UP_TO``) is shaded in the paper's colour."""
    kwargs = next(iter(s.configs.values())).task_kwargs
    D = kwargs["D"]
    Ms = sorted({M for M, _ in s.configs})
    ideal = s.ideal().reindex(Ms)
    fin = s.final.groupby("M").mean(numeric_only=True).reindex(Ms)
    x = np.arange(len(Ms))
    fig, axes = plt.subplots(2, 3, figsize=(PAGE_WIDTH, 5.6), sharex=True, layout="constrained")
    for row, (where, loss, dd, dr, base) in enumerate([("pretraining tasks", "id_loss", "delta_dmmse", "delta_ridge", "loss"),
                                                         ("Gaussian tasks", "ood_loss", "delta_dmmse_ood",
                                                          "delta_ridge_ood", "ood")]):
        ax = axes[row, 0]
        ax.plot(x, fin[loss] / D, "o-", color="k", label="PT (trained)")
        ax.plot(x, ideal[f"{base}_dmmse"] / D, "s--", color="tab:blue", label="dMMSE$_M$")
        ax.plot(x, ideal[f"{base}_ridge"] / D, "^:", color="crimson", label="ridge")
        ax.set_ylabel(f"{where}\nloss ÷ D")
        axes[row, 1].plot(x, fin[dd] / D, "o-", color="tab:blue")
        axes[row, 2].plot(x, fin[dr] / D, "o-", color="crimson")
        for a in axes[row, 1:]:
            _log_y(a)
    if D == PAPER_D:
        paper_span(axes[0, 1], 0, M_position(Ms, PAPER_DMMSE_UP_TO), "≈ dMMSE to M ≈ 2⁶")
    axes[0, 1].set_title("Δ(PT, dMMSE$_M$) ÷ D")
    axes[0, 2].set_title("Δ(PT, ridge) ÷ D")
    axes[0, 0].set_title("loss ÷ D")
    for a in axes[1]:
        M_ticks(a, Ms, every=1 if len(Ms) <= 6 else 2)
        a.set_xlabel("M")
    axes[0, 0].legend()
    return legend_below(fig, axes[0, 0], title=title)


def M_ticks(ax, Ms, every: int = 1) -> None:
    """A categorical M axis (tick i at ``Ms[i]``) labelled at every ``every``-th finite M and at ∞."""
    ax.set_xticks(range(len(Ms)), [div.label_M(M) if M == icl_presets.INF or i % every == 0 else ""
                                   for i, M in enumerate(Ms)])


def calibration_figure(table: pd.DataFrame, chosen: float, title: str = ""):
    """λ̂ at the final weights against the SGLD step size ε, one line per calibration M, the chosen ε marked;
    ✕ where a chain diverged."""
    colours = palette(table["M"])
    fig, ax = plt.subplots(figsize=(PAGE_WIDTH * 0.7, 3.3))
    for M, g in table.sort_values("epsilon").groupby("M"):
        ax.errorbar(g["epsilon"], g["llc_final"], yerr=g["llc_se"], fmt="o-", color=colours[M], capsize=3,
                    label=f"M = {div.label_M(M)}")
        bad = g[g["num_diverged"] > 0]
        ax.plot(bad["epsilon"], bad["llc_final"], "x", color="crimson", ms=10, mew=2)
    ax.axvline(chosen, color="0.4", ls="--", label=f"chosen ε = {chosen:g}")
    ax.set_xscale("log")
    ax.set_xlabel("SGLD step size ε")
    ax.set_ylabel("λ̂ (mean of the last quarter of draws)")
    ax.legend(loc="center left", bbox_to_anchor=(1.01, 0.5))
    ax.set_title(title or "Calibration at the final weights")
    return fig


def M_frames(s: Sweep) -> dict:
    """``{"M = …": figure}``: one M's OOD loss (t_crit circled, its dMMSE and ridge levels) and Δ curves, for
    the M selector."""
    colours = palette(s.curves["M"])
    frames = {}
    for M in sorted(s.curves["M"].unique()):
        fig, axes = plt.subplots(1, 2, figsize=(PAGE_WIDTH, 2.9))
        _one_M(axes, s, M, colours[M])
        fig.suptitle(f"M = {div.label_M(M)}")
        frames[f"M = {div.label_M(M)}"] = fig
        plt.close(fig)
    return frames


def runs_figure(s: Sweep, title: str | None = None):
    """Each M of ``s`` on its own row: its OOD loss (t_crit circled, its dMMSE and ridge levels) and its Δ
    curves; for a sweep shown run by run as its M come in."""
    Ms = sorted(s.curves["M"].unique())
    colours = palette(s.curves["M"])
    fig, axes = plt.subplots(len(Ms), 2, figsize=(PAGE_WIDTH, 3.2 * len(Ms)), squeeze=False)
    for row, M in zip(axes, Ms):
        _one_M(row, s, M, colours[M])
        row[0].set_title(f"M = {div.label_M(M)}: OOD loss")
        row[1].set_title(f"M = {div.label_M(M)}: Δ on $q_M$")
    if title:
        fig.suptitle(title)
    return fig


def _one_M(axes, s: Sweep, M, colour) -> None:
    g = s.curves[s.curves["M"] == M]
    g = g[g["seed"] == g["seed"].min()]
    axes[0].plot(g["step"], g["ood_loss"], color=colour, lw=1.6, label="model")
    axes[0].axhline(g["ood_ridge"].iloc[-1], color="crimson", ls=":", label="ridge")
    if M != icl_presets.INF:
        axes[0].axhline(g["ood_dmmse"].iloc[-1], color=colour, ls="--", label="dMMSE$_M$")
    r = transients(s).loc[M]
    axes[0].plot(r["t_crit"], r["min_ood_loss"], "o", mfc="none", mec="k", ms=9,
                 label="t$^{crit}$" + ("" if r["transient"] else " (no transient)"))
    axes[0].set_title("OOD loss")
    axes[1].plot(g["step"], g["delta_dmmse"], color="tab:blue", label="Δ to dMMSE$_M$")
    axes[1].plot(g["step"], g["delta_ridge"], color="crimson", label="Δ to ridge")
    axes[1].set_title("Δ on $q_M$")
    for ax in axes:
        _log_step(ax)
        ax.legend(fontsize=9)
    _log_y(axes[1])


def checkpoint_frames(s: Sweep, n: int = 8, n_components: int = 2) -> dict:
    """``{"step …": figure}``: every run's position in the PC1-PC2 plane at about ``n`` evaluations spread in
    log-steps (its path so far drawn thin), the predictors marked, for the checkpoint slider."""
    pca, proj, pred = pca_of(s, n_components)
    colours = palette(s.curves["M"])
    steps = np.array(sorted(proj["step"].unique()))
    picks = np.unique(np.searchsorted(steps, np.geomspace(1, steps[-1] + 1, n) - 1).clip(0, len(steps) - 1))
    lims = [(lo - 0.05 * (hi - lo), hi + 0.05 * (hi - lo)) for lo, hi in
            ((min(proj[c].min(), pred[c].min()), max(proj[c].max(), pred[c].max())) for c in ("PC1", "PC2"))]
    frames = {}
    for i in picks:
        fig, ax = plt.subplots(figsize=(PAGE_WIDTH * 0.7, 4.0))
        for label, g in proj.groupby("label", sort=False):
            g = g[g["step"] <= steps[i]]
            ax.plot(g["PC1"], g["PC2"], color=colours[label[0]], lw=0.8, alpha=0.6)
            ax.plot(g["PC1"].iloc[-1], g["PC2"].iloc[-1], "o", color=colours[label[0]], ms=7,
                    label=div.label_M(label[0]) if label[1] == 0 else None)
        for (kind, M), row in pred.iterrows():
            if kind == "ridge":
                ax.plot(row["PC1"], row["PC2"], "X", color="crimson", ms=11, mec="white", label="ridge")
            elif M in colours:
                ax.plot(row["PC1"], row["PC2"], "*", color=colours[M], ms=12, mec="k", mew=0.6)
        ax.set(xlim=lims[0], ylim=lims[1], xlabel="PC1", ylabel="PC2", title=f"step {steps[i]:,}")
        ax.legend(title="M", loc="center left", bbox_to_anchor=(1.01, 0.5))
        frames[f"step {steps[i]:,}"] = fig
        plt.close(fig)
    return frames


def calibration_traces_figure(traces: pd.DataFrame, title: str = ""):
    """The running λ̂ of every chain over the draws, one panel per calibrated step size ε and one colour per M:
    a usable ε gives traces that flatten and agree across chains."""
    import ast
    t = traces.copy()
    t["epsilon"] = [ast.literal_eval(c)[0] for c in t["cell"]]
    t["M"] = t["M"].map(div.label_M)
    eps = sorted(t["epsilon"].unique())
    fig, axes = plt.subplots(1, len(eps), figsize=(PAGE_WIDTH, 2.9), sharey=False)
    for ax, e in zip(np.atleast_1d(axes), eps):
        cell = t[t["epsilon"] == e]
        bad = cell.groupby(["M", "chain"])["diverged"].any()
        keep = cell.set_index(["M", "chain"]).index.map(lambda k: not bad[k])
        sns.lineplot(cell[keep], x="draw", y="value", hue="M", units="chain", estimator=None, lw=0.8, ax=ax,
                     legend=ax is np.atleast_1d(axes)[-1], palette=condition_colours(t["M"].nunique()),
                     hue_order=sorted(t["M"].unique()))
        ax.set_title(f"ε = {e:g}" + (f" ({int(bad.sum())} diverged)" if bad.any() else ""))
        ax.set_ylabel("running λ̂" if e == eps[0] else "")
    sns.move_legend(np.atleast_1d(axes)[-1], "center left", bbox_to_anchor=(1.01, 0.5), title="M")
    if title:
        fig.suptitle(title)
    return fig

FIGURES = {"curves": curves_figure, "pca": pca_figure, "llc": llc_figure, "diversity": diversity_figure}


def show_stored(shown: dict, preset: str, figures, n_components: int = 2) -> Sweep | None:
    """Draw ``figures`` (names of ``FIGURES``) of the stored sweep ``preset`` shown on the page and return it, or
    draw nothing and return None where it is not stored (the page's prose says so: ``committed_label``)."""
    s = shown.get(preset)
    if s is None:
        return None
    title = f"{LABELS.get(preset, preset)}: {int(s.curves['step'].max()):,} steps"
    for name in figures:
        if name == "pca":
            pca_figure(s, n_components, title=f"Joint trajectory PCA, {title}")
        else:
            FIGURES[name](s, title=title)
    return s
