"""Seaborn figures shared by the notebooks (labelled axes, units: steps, nats, fractions)."""
from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns

sns.set_theme(context="notebook", style="whitegrid")

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


def training_curves(metrics: pd.DataFrame, hue: str | None = None, curves=CURVES, height=3.0, title=None):
    """One panel per metric against training step: mean over seeds with a 95% bootstrap band.

    The accuracy panel also shows y_1 (partial solution) and the other outputs; the ρ panel shows
    the data's own ρ as a dashed line.
    """
    ncols = min(3, len(curves))
    nrows = -(-len(curves) // ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(height * 1.5 * ncols, height * nrows), constrained_layout=True)
    axes = np.atleast_1d(axes).ravel()
    for ax in axes[len(curves):]:
        ax.set_visible(False)
    for ax, (col, panel, label) in zip(axes, curves):
        if col == "acc" and hue is None:
            data = _long(metrics, ["acc", "acc_first", "acc_rest"], None)
            data["metric"] = data["metric"].map({"acc": "all outputs", "acc_first": "y₁ only", "acc_rest": "y₂…yₙ"})
            sns.lineplot(data=data, x="step", y="value", hue="metric", errorbar=("ci", 95), ax=ax)
            ax.legend(fontsize=7, title=None)
        else:
            sns.lineplot(data=metrics, x="step", y=col, hue=hue, errorbar=("ci", 95), ax=ax,
                         palette="viridis" if hue else None, legend=(col == curves[-1][0]) if hue else False)
        if col == "rho":
            ax.axhline(metrics["rho_data"].mean(), ls="--", c="grey", lw=1, label="data ρ")
        ax.set(xlabel="training step", ylabel=label, title=panel)
    if hue:
        leg = axes[len(curves) - 1].get_legend()
        if leg is not None:
            leg.set_title(hue)
    if title:
        fig.suptitle(title)
    return fig


def position_heatmap(positions: pd.DataFrame, value: str = "acc", ax=None, max_ticks=12):
    """Per-position greedy accuracy (mean over seeds) as a heat-map: output position x training step."""
    table = positions.groupby(["position", "step"])[value].mean().unstack("step")
    if ax is None:
        fig, ax = plt.subplots(figsize=(9, 3.2), constrained_layout=True)
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


def cosine_heatmap(cos: np.ndarray, ax=None, title=None):
    """Pairwise cosine similarity of hidden states across output-predicting positions."""
    if ax is None:
        _, ax = plt.subplots(figsize=(4.2, 3.4), constrained_layout=True)
    n = cos.shape[0]
    sns.heatmap(cos, ax=ax, vmin=-1, vmax=1, cmap="RdBu_r", square=True,
                xticklabels=range(1, n + 1), yticklabels=range(1, n + 1), cbar_kws={"label": "cosine"})
    ax.set(xlabel="output position", ylabel="output position", title=title)
    return ax.figure


def snapshot(attn: np.ndarray, cos: np.ndarray, step: int, query_rows=None):
    """Attention map and cosine matrix side by side at one training step (a widget frame)."""
    fig, (a, b) = plt.subplots(1, 2, figsize=(8.4, 3.4), constrained_layout=True)
    attention_map(attn, ax=a, title=f"attention, step {step}", rows=query_rows)
    cosine_heatmap(cos, ax=b, title=f"cosine of hidden states, step {step}")
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
