"""The LLC page's figures, drawn for the book's text column (``PAGE_WIDTH`` inches, panels in rows of two)."""
from __future__ import annotations

import matplotlib.pyplot as plt
import pandas as pd
import seaborn as sns

from ..plots import PAGE_WIDTH
from .calibration import plot_traces

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
