"""Seaborn figures shared by the notebooks (labelled axes, units: steps, nats, fractions).

Every figure is drawn for the book's text column: ``PAGE_WIDTH`` inches wide at 100 dpi, so that with the
fonts of ``book.pages.setup()`` (nothing under 9 pt) the smallest text is >= 9 px on screen. Multi-panel
figures stack panels in rows of two instead of growing wider.
"""
from __future__ import annotations

import textwrap

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns

PAGE_WIDTH = 7.5  # inches: the text column of the built book at 100 dpi
# Spread over seeds: the band from the lowest to the highest seed, which stays inside the metric's range (± 1 sd
# of three seeds left it: accuracy above 1, cosine below 0).
SEED_RANGE = ("pi", 100)
PAPER_COLOUR = "#c0392b"  # the paper's own numbers, wherever a figure draws them
LABEL_BOX = dict(boxstyle="square,pad=0.1", facecolor="white", edgecolor="none", alpha=0.8)  # a label over curves

LABEL_ROOM = 0.14  # the top share of the axes kept free for the paper's labels


def room_above(ax, top: float) -> None:
    """Grow ``ax``'s y range (never shrink it) so that its top ``LABEL_ROOM`` lies above the data value ``top``,
    measured in the axis's own scale (log or linear)."""
    low, high = ax.get_ylim()
    share = LABEL_ROOM / (1 - LABEL_ROOM)
    wanted = top * (top / low) ** share if ax.get_yscale() == "log" else top + (top - low) * share
    ax.set_ylim(low, max(high, wanted))


def paper_levels(ax, levels) -> None:
    """The paper's own numbers on ``ax``: dotted horizontal lines labelled "paper: what", where ``levels`` is one
    ``(value, what)`` or a list of them. The y range grows so that the highest label fits above its line
    (``room_above``)."""
    levels = [levels] if isinstance(levels, tuple) else list(levels)
    room_above(ax, max(value for value, _ in levels))
    for value, what in levels:
        ax.axhline(value, ls=":", c=PAPER_COLOUR, lw=1.5)
        ax.annotate(f"paper: {what}", (0.99, value), xycoords=("axes fraction", "data"), ha="right", va="bottom",
                    color=PAPER_COLOUR, fontsize="small", bbox=LABEL_BOX, zorder=6)


def paper_span(ax, start, end, what) -> None:
    """The paper's own range of x values on ``ax`` (e.g. the M where it reports a transient): a light band from
    ``start`` to ``end`` in the paper's colour, labelled "paper: what" in a strip added above the data, from the
    band's left edge (its right edge when the band lies in the right half of the axes; ``room_above``)."""
    low, high = ax.get_ylim()
    room_above(ax, high)
    ax.axvspan(start, end, color=PAPER_COLOUR, alpha=0.08, lw=0)
    for x in (start, end):
        ax.axvline(x, ls=":", c=PAPER_COLOUR, lw=1.2)
    to_axes = ax.transData + ax.transAxes.inverted()
    right = to_axes.transform((start, low))[0] > 0.5
    ax.annotate(f"paper: {what}", (end if right else start, 0.98), xycoords=("data", "axes fraction"),
                ha="right" if right else "left", va="top", color=PAPER_COLOUR, fontsize="small", bbox=LABEL_BOX,
                zorder=6)


def condition_colours(n: int) -> list:
    """``n`` distinguishable colours, one per condition: seaborn's colour-blind-safe qualitative palette up to its
    10 colours, viridis (ordered, less distinct) beyond."""
    return sns.color_palette("colorblind" if n <= 10 else "viridis", max(1, n))


CURVES = (  # (column, panel title, y label)
    ("loss", "loss, all positions", "cross-entropy (nats)"),
    ("acc", "greedy accuracy", "fraction correct"),
    ("rho", "repetition frequency ρ", "fraction of equal pairs"),
    ("cosine", "representation collapse", "mean pairwise cosine"),
    ("apm", "attention progress (APM)", "fraction of |scores| on Ω"),
)


def _long(metrics: pd.DataFrame, columns, hue):
    keep = ["step", "seed"] + ([hue] if hue else [])
    return metrics.melt(id_vars=keep, value_vars=list(columns), var_name="metric", value_name="value")


def training_curves(metrics: pd.DataFrame, hue: str | None = None, curves=CURVES, height=2.5, title=None,
                    paper: dict | None = None):
    """One panel per metric against training step (two per row): mean over seeds with a band from the lowest to the highest seed.

    The accuracy panel also shows y_1 (partial solution) and the other outputs; the ρ panel shows
    the data's own ρ as a dashed line. With ``hue``, its legend takes the spare panel. ``paper``:
    ``{column: (value, what) or a list of them}``, the paper's own numbers (``paper_levels``).
    """
    ncols = min(2, len(curves))
    nrows = -(-len(curves) // ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(PAGE_WIDTH, height * nrows), constrained_layout=True)
    axes = np.atleast_1d(axes).ravel()
    for ax in axes[len(curves):]:
        ax.set_visible(False)
    for ax, (col, panel, label) in zip(axes, curves):
        if col == "acc" and hue is None:
            data = _long(metrics, ["acc", "acc_first", "acc_rest"], None)
            data["metric"] = data["metric"].map({"acc": "all outputs", "acc_first": "y₁ only", "acc_rest": "y₂…yₙ"})
            sns.lineplot(data=data, x="step", y="value", hue="metric", errorbar=SEED_RANGE, ax=ax)
            ax.legend(title=None)
        else:
            sns.lineplot(data=metrics, x="step", y=col, hue=hue, errorbar=SEED_RANGE, ax=ax,
                         palette=condition_colours(metrics[hue].nunique()) if hue else None,
                         legend=(col == curves[-1][0]) if hue else False)
        if col == "rho":
            ax.axhline(metrics["rho_data"].mean(), ls="--", c="grey", lw=1, label="data ρ")
        if col in (paper or {}):
            paper_levels(ax, paper[col])
        ax.set(xlabel="training step", ylabel=label, title=panel)
    if hue:
        leg = axes[len(curves) - 1].get_legend()
        if leg is not None:
            leg.set_title(hue)
        legend_aside(fig)
    if title:
        fig.suptitle(title)
    return fig


PER_RUN = (("acc_rest", "accuracy of y₂…yₙ", "fraction correct"),
           ("rho", "repetition frequency ρ", "fraction of equal pairs"),
           ("cosine", "representation collapse", "mean pairwise cosine"),
           ("apm", "attention progress (APM)", "fraction of |scores| on Ω"))


def per_run_curves(metrics: pd.DataFrame, hue: str = "seed", title=None):
    """Each run on its own (no averaging, so each jump stays abrupt): 2 x 2 panels, one line per ``hue``."""
    data = metrics.assign(**{hue: metrics[hue].astype(str)})
    fig, axes = plt.subplots(2, 2, figsize=(PAGE_WIDTH, 5.0), constrained_layout=True)
    for ax, (col, panel, label) in zip(axes.ravel(), PER_RUN):
        sns.lineplot(data=data, x="step", y=col, hue=hue, ax=ax, legend=(col == "acc_rest"))
        ax.set(xlabel="training step", ylabel=label, title=panel)
        if col == "rho":
            ax.axhline(metrics["rho_data"].mean(), ls="--", c="grey", lw=1)
    if title:
        fig.suptitle(title)
    return fig


def shade_span(fig, start, end) -> None:
    """Shade the steps [start, end] (e.g. the mean plateau) on every visible data panel; skip NaN ends."""
    if not (np.isfinite(start) and np.isfinite(end)):
        return
    for ax in fig.axes:
        if ax.get_visible() and ax.get_label() != "<colorbar>" and ax.axison:
            ax.axvspan(start, end, color="grey", alpha=0.12, lw=0)


def position_heatmap(positions: pd.DataFrame, value: str = "acc", ax=None, max_ticks=12):
    """Per-position greedy accuracy (mean over seeds) as a heat-map: output position x training step."""
    table = positions.groupby(["position", "step"])[value].mean().unstack("step")
    if ax is None:
        fig, ax = plt.subplots(figsize=(PAGE_WIDTH, 3.2), constrained_layout=True)
    stride = max(1, table.shape[1] // max_ticks)
    sns.heatmap(table, ax=ax, vmin=0, vmax=1, cmap="viridis", xticklabels=stride,
                cbar_kws={"label": "accuracy (fraction)"})
    ax.set(xlabel="training step", ylabel="output position j (y_j)")
    return ax.figure


def attention_map(attn: np.ndarray, ax=None, title=None, rows=None):
    """Batch-mean attention scores (query x key) of one evaluation; ``rows`` restricts the queries."""
    if ax is None:
        _, ax = plt.subplots(figsize=(4.2, 3.4), constrained_layout=True)
    a = attn if rows is None else attn[rows]
    lim = float(np.abs(a).max()) or 1.0
    sns.heatmap(a, ax=ax, cmap="RdBu_r", vmin=-lim, vmax=lim, square=False, xticklabels=4, yticklabels=4,
                cbar_kws={"label": "score"})
    ax.set(xlabel="key position", ylabel="query position", title=title)
    return ax.figure


def cosine_heatmap(cos: np.ndarray, ax=None, title=None, labels=None, axis_label="output position", cbar=True):
    """Pairwise cosine similarity of hidden states (NaN cells left blank): across output-predicting positions
    (labelled 1..n), or with ``labels`` and ``axis_label`` across anything else (e.g. generation steps)."""
    if ax is None:
        _, ax = plt.subplots(figsize=(4.2, 3.4), constrained_layout=True)
    labels = range(1, cos.shape[0] + 1) if labels is None else labels
    sns.heatmap(cos, ax=ax, vmin=-1, vmax=1, cmap="RdBu_r", square=True, xticklabels=labels, yticklabels=labels,
                cbar=cbar, cbar_kws={"label": "cosine"})
    ax.set(xlabel=axis_label, ylabel=axis_label, title=title)
    ax.grid(False)  # no grid lines across the blank cells
    return ax.figure


def snapshot(attn: np.ndarray, cos: np.ndarray, step: int, query_rows=None, title=None):
    """Attention map and cosine matrix side by side at one training step (a widget frame)."""
    fig, (a, b) = plt.subplots(1, 2, figsize=(PAGE_WIDTH, 3.3), constrained_layout=True)
    attention_map(attn, ax=a, title=f"attention, step {step}", rows=query_rows)
    if query_rows is not None:
        label_rows(a, query_rows)
    cosine_heatmap(cos, ax=b, title=f"cosine, step {step}")
    if title:
        fig.suptitle(title)
    return fig


def run_overview(result, step: float, query_rows, second: str = "attn_end", title=None):
    """One run at a glance (a widget frame): its accuracy/ρ/cosine/APM curves on top; below, the attention
    map at the evaluation nearest ``step`` and either the final attention map (``second="attn_end"``) or
    the cosine matrix at that step (``second="cos"``)."""
    if second not in ("attn_end", "cos"):
        raise ValueError(f"second must be 'attn_end' or 'cos', got {second!r}")
    steps = result.arrays["step"]
    i = int(np.abs(steps - step).argmin())
    fig = plt.figure(figsize=(PAGE_WIDTH, 6.0), constrained_layout=True)
    top, bottom = fig.subfigures(2, 1, height_ratios=[1, 1.15])
    ax = top.subplots()
    long = result.metrics.melt(id_vars="step", value_vars=["acc_rest", "rho", "cosine", "apm"], var_name="metric")
    long["metric"] = long["metric"].map({"acc_rest": "accuracy y₂…yₙ", "rho": "ρ", "cosine": "cosine", "apm": "APM"})
    sns.lineplot(data=long, x="step", y="value", hue="metric", ax=ax)
    ax.axvline(steps[i], ls=":", c="grey")
    ax.set(xlabel="training step", ylabel="value (fraction)", ylim=(-0.02, 1.02))
    ax.legend(title=None, loc="center left", bbox_to_anchor=(1.0, 0.5))
    a, b = bottom.subplots(1, 2)
    attention_map(result.arrays["attn"][i], ax=a, title=f"attention, step {int(steps[i])}", rows=query_rows)
    label_rows(a, query_rows)
    if second == "attn_end":
        attention_map(result.arrays["attn"][-1], ax=b, title=f"attention, step {int(steps[-1])} (end)",
                      rows=query_rows)
        label_rows(b, query_rows)
    else:
        cosine_heatmap(result.arrays["cos"][i], ax=b, title=f"cosine, step {int(steps[i])}")
    if title:
        fig.suptitle(title)
    return fig


def output_rows(cfg) -> slice:
    """Query rows predicting y_2..y_n of ``cfg``'s task; the y_1 row (the partial solution) has
    scores large enough to swamp the colours of an attention map."""
    task = cfg.make_task()
    return slice(task.out_positions.start + 1, task.out_positions.stop)


def label_rows(ax, rows: slice, every: int = 2) -> None:
    """Tick labels of a row-restricted attention map: the actual query positions."""
    ax.set_yticks(np.arange(0, rows.stop - rows.start, every) + 0.5)
    ax.set_yticklabels(list(range(rows.start, rows.stop, every)), rotation=0)


def legend_aside(fig) -> None:
    """Move the hue legend of ``training_curves`` out of the data, into the empty sixth panel."""
    spare = [ax for ax in fig.axes if not ax.get_visible()]
    for ax in fig.axes:
        legend = ax.get_legend() if ax.get_visible() else None
        if spare and legend is not None and legend.get_title().get_text():
            handles, labels = ax.get_legend_handles_labels()
            title = legend.get_title().get_text()
            legend.remove()
            spare[0].set_visible(True)
            spare[0].axis("off")
            spare[0].legend(handles, labels, title=title, loc="center", frameon=False)
            return


LLC_ROWS = (  # (column, y label) of plateau_llc_curves, top to bottom
    ("loss", "loss (nats)"), ("acc", "accuracy"), ("cosine", "cosine"), ("apm", "APM"), ("llc_mean", "λ̂"))


def plateau_llc_curves(metrics: pd.DataFrame, llc: pd.DataFrame, milestones: pd.DataFrame, found: dict,
                       title=None, row_height: float = 1.55):
    """λ̂ beside the training metrics on one time axis, one column per seed: loss, accuracy (y₁ and y₂…yₙ),
    cosine, APM and λ̂ (± SE, with the GP mean). The plateau (partial step → jump step) is shaded and the GP
    stage boundaries of λ̂ (``found``: seed -> ``stages.GPStages``) are dashed lines in every panel."""
    seeds = list(milestones["seed"])
    fig, axes = plt.subplots(len(LLC_ROWS), len(seeds), figsize=(PAGE_WIDTH, row_height * len(LLC_ROWS) + 0.6),
                             sharex="col", sharey="row", constrained_layout=True, squeeze=False)
    palette = sns.color_palette()
    for j, seed in enumerate(seeds):
        m, curve = metrics[metrics["seed"] == seed], llc[llc["seed"] == seed]
        stone = milestones[milestones["seed"] == seed].iloc[0]
        for i, (col, label) in enumerate(LLC_ROWS):
            ax = axes[i, j]
            if col == "acc":
                ax.plot(m["step"], m["acc_first"], color=palette[1], label="y₁")
                ax.plot(m["step"], m["acc_rest"], color=palette[2], label="y₂…yₙ")
            elif col == "llc_mean":
                ax.fill_between(curve["step"], curve["llc_mean"] - curve["llc_se"],
                                curve["llc_mean"] + curve["llc_se"], color=palette[3], alpha=0.25, lw=0)
                ax.plot(curve["step"], curve["llc_mean"], "o", ms=3, color=palette[3], label="λ̂ ± SE")
                ax.plot(found[seed].steps, found[seed].smooth, color="black", lw=1, label="GP mean")
            else:
                ax.plot(m["step"], m[col], color=palette[0])
            if pd.notna(stone["partial_step"]) and pd.notna(stone["jump_step"]):
                ax.axvspan(stone["partial_step"], stone["jump_step"], color="grey", alpha=0.15, lw=0)
            for b in found[seed].boundaries:
                ax.axvline(b, color="black", ls="--", lw=0.9)
            if j == 0:
                ax.set_ylabel(label)
        axes[0, j].set_title(f"seed {seed}")
        axes[-1, j].set_xlabel("training step")
    axes[1, -1].legend(loc="center right", fontsize=9, frameon=False)
    axes[-1, -1].legend(loc="lower right", fontsize=9, frameon=False)
    if title:
        fig.suptitle(title)
    return fig


def calibration_panels(table: pd.DataFrame, title=None):
    """A calibration over ε (x, log), nβ (hue) at each calibration step (column): final λ̂ ± SE, the chosen
    setting ringed, unhealthy cells (diverged, negative or not converged) drawn hollow."""
    steps = sorted(table["step"].unique())
    fig, axes = plt.subplots(1, len(steps), figsize=(PAGE_WIDTH, 3.0), constrained_layout=True, squeeze=False)
    nbetas = sorted(table["nbeta"].unique())
    palette = dict(zip(nbetas, sns.color_palette(n_colors=len(nbetas))))
    for ax, step in zip(axes[0], steps):
        part = table[table["step"] == step]
        for nb in nbetas:
            cells = part[part["nbeta"] == nb].sort_values("epsilon")
            ax.errorbar(cells["epsilon"], cells["llc_final"], yerr=cells["llc_se"], color=palette[nb], marker="",
                        capsize=2, label=f"nβ = {nb:g}")
            ok = cells["healthy"].astype(bool)
            ax.plot(cells["epsilon"][ok], cells["llc_final"][ok], "o", color=palette[nb])
            ax.plot(cells["epsilon"][~ok], cells["llc_final"][~ok], "o", mfc="white", color=palette[nb])
        chosen = part[part["chosen"].astype(bool)]
        ax.plot(chosen["epsilon"], chosen["llc_final"], "o", ms=13, mfc="none", color="black", label="chosen")
        ax.set(xscale="log", xlabel="SGLD step size ε", ylabel="final λ̂", title=f"checkpoint at step {step}")
        epsilons = sorted(part["epsilon"].unique())
        ax.set_xticks(epsilons, [f"{e:.0e}".replace("e-0", "e-") for e in epsilons])
        ax.minorticks_off()
    axes[0, -1].legend(frameon=False, fontsize=9)
    if title:
        fig.suptitle(title)
    return fig


def setup_curves(metrics: pd.DataFrame, column: str, ylabel: str, title=None, height=2.1):
    """Small multiples of one metric against training step: a panel per setup ``family`` (two per row, in the
    order of ``metrics``), a line per run (no averaging, so each jump stays abrupt) coloured by setup, and the
    baseline's runs grey and dashed in every panel for reference."""
    families = [f for f in dict.fromkeys(metrics["family"]) if f != "baseline"]
    baseline = metrics[metrics["family"] == "baseline"]
    nrows = -(-len(families) // 2)
    fig, axes = plt.subplots(nrows, 2, figsize=(PAGE_WIDTH, height * nrows), constrained_layout=True, squeeze=False)
    for ax in axes.ravel()[len(families):]:
        ax.set_visible(False)
    for ax, family in zip(axes.ravel(), families):
        for i, (_, run) in enumerate(baseline.groupby("seed")):
            ax.plot(run["step"], run[column], color="grey", ls="--", lw=1, label=None if i else "baseline")
        part = metrics[metrics["family"] == family]
        sns.lineplot(data=part, x="step", y=column, hue="setup", hue_order=list(dict.fromkeys(part["setup"])),
                     units="seed", estimator=None, ax=ax)
        ax.set(xlabel="training step", ylabel=ylabel, title=family)
        ax.legend(title=None, fontsize=9, frameon=True, framealpha=0.85, loc="best")
    if title:
        fig.suptitle(title)
    return fig


SETUP_MILESTONES = (("plateau_span", "plateau span (steps)"), ("peak_cosine", "peak cosine"),
                    ("peak_rho", "peak ρ"))


def setup_milestones(table: pd.DataFrame, plateaued, title=None):
    """Plateau span, peak cosine and peak ρ of each run (a dot per seed), one row per setup; ``plateaued`` (a
    boolean per row of ``table``) colours the runs that learned y₁ first and then plateaued. A run that never
    jumped is marked "no jump" in the span panel; a negative span means the other outputs came first."""
    data = table.assign(setup=table["setup"].astype(str),
                        run=np.where(plateaued, "y₁ first, then a plateau", "no plateau"))
    order = list(dict.fromkeys(data["setup"]))
    fig, axes = plt.subplots(1, len(SETUP_MILESTONES), figsize=(PAGE_WIDTH, 0.3 * len(order) + 1.6),
                             sharey=True, constrained_layout=True)
    palette = {"y₁ first, then a plateau": sns.color_palette()[0], "no plateau": sns.color_palette()[3]}
    for i, (ax, (column, label)) in enumerate(zip(axes, SETUP_MILESTONES)):
        sns.stripplot(data=data, x=column, y="setup", hue="run", order=order, palette=palette, jitter=False,
                      size=6, ax=ax, legend=(i == 0))
        ax.set(xlabel=label, ylabel=None if i else "setup")
    axes[0].axvline(0, color="grey", lw=1)
    for row, name in enumerate(order):
        if data.loc[data["setup"] == name, "jump_step"].isna().any():
            axes[0].text(0.03, row, "no jump", va="center", ha="left", fontsize=9, color="dimgrey",
                         transform=axes[0].get_yaxis_transform())
    sns.move_legend(axes[0], "lower center", bbox_to_anchor=(0.5, 1.0), ncol=2, title=None, frameon=False)
    legend = axes[0].get_legend()
    legend.remove()
    fig.legend(legend.legend_handles, [t.get_text() for t in legend.get_texts()], loc="outside lower center",
               ncol=2, frameon=False)
    if title:
        fig.suptitle(title)
    return fig


def task_facets(long: pd.DataFrame, ylabel: str, title=None, ncols: int = 3, panel_height: float = 1.9,
                paper: dict | None = None):
    """Small multiples, one panel per task (its own step axis): ``long`` has columns task, step, curve, value;
    curves whose name starts with "data" (the data's own value) are grey dashed lines. The legend takes a spare
    panel. ``paper``: ``{task label: (value, what) or a list of them}``, the paper's own numbers on that task's
    panel (``paper_levels``)."""
    tasks = list(long["task"].cat.categories if hasattr(long["task"], "cat") else dict.fromkeys(long["task"]))
    nrows = -(-(len(tasks) + 1) // ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(PAGE_WIDTH, panel_height * nrows), constrained_layout=True)
    axes = axes.ravel()
    curves = [c for c in dict.fromkeys(long["curve"]) if not c.startswith("data")]
    palette = dict(zip(curves, sns.color_palette(n_colors=len(curves))))
    for ax, task in zip(axes, tasks):
        data = long[(long["task"] == task) & long["value"].notna()]
        for curve, part in data.groupby("curve", sort=False):
            style = ({"color": "grey", "ls": "--", "lw": 1} if curve.startswith("data")
                     else {"color": palette[curve], "lw": 1.5})
            ax.plot(part["step"], part["value"], label=curve, **style)
        if str(task) in (paper or {}):
            paper_levels(ax, paper[str(task)])
        ax.set_title(str(task))
        ax.set_xlabel("training step")
    for ax in axes[::ncols]:
        ax.set_ylabel(ylabel)
    handles = {}
    for ax in axes[:len(tasks)]:
        handles.update({label: h for h, label in zip(*ax.get_legend_handles_labels())})
    for ax in axes[len(tasks):]:
        ax.axis("off")
    axes[len(tasks)].legend(handles.values(), handles.keys(), loc="center", frameon=False)
    if title:
        fig.suptitle(title)
    return fig


def task_position_heatmaps(positions: pd.DataFrame, title=None, ncols: int = 3, panel_height: float = 1.9):
    """Per-position greedy accuracy of every task (one heat-map per task: output position × training step,
    each on its own step axis) with one shared colour bar."""
    tasks = list(positions["task"].cat.categories if hasattr(positions["task"], "cat")
                 else dict.fromkeys(positions["task"]))
    nrows = -(-len(tasks) // ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(PAGE_WIDTH, panel_height * nrows), constrained_layout=True)
    axes = axes.ravel()
    image = None
    for ax, task in zip(axes, tasks):
        table = positions[positions["task"] == task].groupby(["position", "step"])["acc"].mean().unstack("step")
        steps, rows = table.columns.to_numpy(), table.index.to_numpy()
        image = ax.imshow(table.to_numpy(), aspect="auto", origin="lower", cmap="viridis", vmin=0, vmax=1,
                          extent=(steps[0], steps[-1], rows[0] - 0.5, rows[-1] + 0.5), interpolation="nearest")
        ax.set_title(str(task))
        ax.set_xlabel("training step")
        ax.grid(False)
    for ax in axes[::ncols]:
        ax.set_ylabel("output j")
    for ax in axes[len(tasks):]:
        ax.axis("off")
    fig.colorbar(image, ax=axes.tolist(), shrink=0.6, label="accuracy (fraction)")
    if title:
        fig.suptitle(title)
    return fig


def legend_below(fig, ax, ncols: int | None = None, title=None):
    """Move ``ax``'s legend (drawn on one panel of a grid) below the whole figure, in ``ncols`` columns (all
    entries on one row by default), and give the figure its ``title``. Returns the figure."""
    handles, labels = ax.get_legend_handles_labels()
    ax.get_legend().remove()
    fig.legend(handles, labels, loc="outside lower center", ncols=ncols or len(labels), frameon=False)
    if title:
        fig.suptitle(title)
    return fig


def _shade(ax, span) -> None:
    """Shade the steps ``span`` = (start, end) on one axis (nothing if either is missing)."""
    if span is not None and all(v is not None and np.isfinite(v) for v in span):
        ax.axvspan(*span, color="grey", alpha=0.12, lw=0)


def probe_curves(metrics: pd.DataFrame, scalars: pd.DataFrame, spans: dict | None = None, title=None):
    """Fig. 20, one column per seed: the model's loss (top) and its greedy and teacher-forced accuracy beside the
    probe's train and test accuracy on the attention output (bottom); ``spans``: seed -> plateau (start, end), shaded."""
    probe = scalars.rename(columns={"label": "seed"}).melt(id_vars=["step", "seed"], var_name="curve",
                                                           value_vars=["probe_train_acc", "probe_test_acc"])
    model = metrics.melt(id_vars=["step", "seed"], value_vars=["acc", "acc_tf"], var_name="curve")
    names = {"acc": "model, greedy", "acc_tf": "model, teacher-forced", "probe_train_acc": "probe, train sequences",
             "probe_test_acc": "probe, test sequences"}
    acc = pd.concat([model, probe], ignore_index=True).assign(curve=lambda d: d["curve"].map(names))
    seeds = sorted(metrics["seed"].unique())
    fig, axes = plt.subplots(2, len(seeds), figsize=(PAGE_WIDTH, 5.2), constrained_layout=True, sharex=True,
                             sharey="row", squeeze=False)
    for i, seed in enumerate(seeds):
        top, bottom = axes[0, i], axes[1, i]
        sns.lineplot(data=metrics[metrics["seed"] == seed], x="step", y="loss", ax=top)
        sns.lineplot(data=acc[acc["seed"] == seed], x="step", y="value", hue="curve", style="curve", ax=bottom,
                     hue_order=list(names.values()), style_order=list(names.values()), legend=i == 0)
        top.set(title=f"seed {seed}", xlabel="", ylabel="model loss (nats)" if i == 0 else "")
        bottom.set(xlabel="training step", ylabel="accuracy (fraction)" if i == 0 else "", ylim=(-0.02, 1.02))
        for ax in (top, bottom):
            _shade(ax, (spans or {}).get(seed))
    return legend_below(fig, axes[1, 0], ncols=2, title=title)


def location_cosines(scalars: pd.DataFrame, names: dict, spans: dict | None = None, title=None, paper=None):
    """Figs. 41-42, one panel per seed: the mean cosine at each location (``names``: column suffix -> label)
    over training, on one axis; ``spans``: seed -> plateau (start, end), shaded; ``paper``: ``(value, what)`` or a
    list of them, the paper's own numbers on every panel (``paper_levels``)."""
    data = scalars.melt(id_vars=["step", "label"], value_vars=[f"cosine_{n}" for n in names], var_name="location")
    data["location"] = data["location"].str.removeprefix("cosine_").map(names)
    seeds = sorted(data["label"].unique())
    fig, axes = plt.subplots(1, len(seeds), figsize=(PAGE_WIDTH, 3.6), constrained_layout=True, sharey=True,
                             squeeze=False)
    for i, (ax, seed) in enumerate(zip(axes[0], seeds)):
        sns.lineplot(data=data[data["label"] == seed], x="step", y="value", hue="location", style="location", ax=ax,
                     hue_order=list(names.values()), style_order=list(names.values()), legend=i == 0)
        ax.set(xlabel="training step", ylabel="mean pairwise cosine" if i == 0 else "", ylim=(-0.05, 1.02),
               title=f"seed {seed}")
        _shade(ax, (spans or {}).get(seed))
        if paper:
            paper_levels(ax, paper)
    return legend_below(fig, axes[0, 0], ncols=3, title=title)


def location_heatmaps(rows: dict, names: dict, title=None):
    """One row of cosine heat-maps per entry of ``rows`` ({row label: {location: (G, G) matrix}}), one column
    per location (``names``: location -> label), one shared colour bar."""
    fig, axes = plt.subplots(len(rows), len(names), figsize=(PAGE_WIDTH, 1.45 * len(rows) + 1.0),
                             constrained_layout=True, squeeze=False)
    for r, (row_label, mats) in enumerate(rows.items()):
        for c, (name, label) in enumerate(names.items()):
            G = mats[name].shape[0]
            ticks = [str(j) if j in (1, G) else "" for j in range(1, G + 1)]
            cosine_heatmap(mats[name], ax=axes[r, c], labels=ticks, axis_label="", cbar=False,
                           title=textwrap.fill(label, 14) if r == 0 else None)
            axes[r, c].tick_params(labelsize=9, length=0)
            if c == 0:
                axes[r, c].set_ylabel(row_label)
    fig.colorbar(axes[0, 0].collections[0], ax=axes, shrink=0.8, label="cosine")
    if title:
        fig.suptitle(title)
    return fig


def location_norms(norms: pd.DataFrame, names: dict, title=None):
    """Per-position mean L2 norm at each location of ``names`` (one panel each), one line per ``at`` (e.g. the
    first checkpoint, the peak of collapse, the last), mean over runs with a band from the lowest to the highest run."""
    fig, axes = plt.subplots(1, len(names), figsize=(PAGE_WIDTH, 3.2), constrained_layout=True, sharey=False)
    for i, (ax, (name, label)) in enumerate(zip(np.atleast_1d(axes), names.items())):
        sns.lineplot(data=norms[norms["location"] == name], x="position", y="value", hue="at", style="at",
                     errorbar=SEED_RANGE, ax=ax, legend=i == 0, marker="o", markersize=4)
        ax.set(xlabel="output position j (predicts y_j)", ylabel="mean L2 norm" if i == 0 else "", title=label)
    return legend_below(fig, np.atleast_1d(axes)[0], title=title)


def markers_vs_step(table: pd.DataFrame, panels, reference: dict | None = None, hue: str = "seed",
                    style: str | None = None, title=None, ncols: int = 2, panel_height: float = 2.4,
                    ranges: dict | None = None):
    """Markers against log-step, one panel per ``panels`` entry (column, y label), one line per ``hue`` (and
    ``style``) value; ``reference``: {column: {step: value}} drawn as black crosses (the paper's values),
    labelled "paper"; ``ranges``: {column: {step: (low, high)}} drawn as grey bars (the paper's seeds' range),
    labelled "paper, seeds 0–4"."""
    nrows = -(-len(panels) // ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(PAGE_WIDTH, panel_height * nrows + 0.8), sharex=True,
                             layout="constrained", squeeze=False)
    palette = dict(zip(sorted(table[hue].unique()), sns.color_palette("colorblind", table[hue].nunique())))
    for ax, (column, ylabel) in zip(axes.flat, panels):
        sns.lineplot(table, x="step", y=column, hue=hue, style=style, palette=palette, marker="o", markersize=4,
                     ax=ax, legend=ax is axes.flat[0], errorbar=None)
        spans = (ranges or {}).get(column)
        if spans:
            ax.vlines(list(spans), [lo for lo, _ in spans.values()], [hi for _, hi in spans.values()], color="0.55",
                      lw=4, alpha=0.6, zorder=4, label="paper, seeds 0–4")
        points = (reference or {}).get(column)
        if points:
            ax.scatter(list(points), list(points.values()), marker="X", s=55, color="black", zorder=5, label="paper")
        ax.set(xscale="log", xlabel="step", ylabel=ylabel)
    for ax in axes.flat[len(panels):]:
        ax.remove()
    if reference and not (reference.get(panels[0][0])):
        axes.flat[0].scatter([], [], marker="X", s=55, color="black", label="paper")
    return legend_below(fig, axes.flat[0], ncols=4, title=title)
