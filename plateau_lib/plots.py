"""Seaborn figures shared by the notebooks (labelled axes, units: steps, nats, fractions).

Every figure is drawn for the book's text column: ``PAGE_WIDTH`` inches wide at 100 dpi, so that with the
fonts of ``book.setup()`` (nothing under 9 pt) the smallest text is >= 9 px on screen. Multi-panel
figures stack panels in rows of two instead of growing wider.
"""
from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns

PAGE_WIDTH = 7.5  # inches: the text column of the built book at 100 dpi

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


def training_curves(metrics: pd.DataFrame, hue: str | None = None, curves=CURVES, height=2.5, title=None):
    """One panel per metric against training step (two per row): mean over seeds with a ± 1 sd band.

    The accuracy panel also shows y_1 (partial solution) and the other outputs; the ρ panel shows
    the data's own ρ as a dashed line. With ``hue``, its legend takes the spare panel.
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
            sns.lineplot(data=data, x="step", y="value", hue="metric", errorbar="sd", ax=ax)
            ax.legend(title=None)
        else:
            sns.lineplot(data=metrics, x="step", y=col, hue=hue, errorbar="sd", ax=ax,
                         palette="viridis" if hue else None, legend=(col == curves[-1][0]) if hue else False)
        if col == "rho":
            ax.axhline(metrics["rho_data"].mean(), ls="--", c="grey", lw=1, label="data ρ")
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
