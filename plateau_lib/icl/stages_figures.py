"""The stages page's figures (``notebooks/icl_stages.ipynb``): Hoogland Fig. 1(b) for one run (λ̂, the evaluation
loss and the markers, the stages shaded), the stage rule on one curve (its side page), the checkpoint widget's
frames, and the section that draws a stored run (``show_stored_run``). The numbers are in ``stages_page``."""
from __future__ import annotations

import math

import matplotlib.pyplot as plt
import numpy as np
import seaborn as sns
from matplotlib.lines import Line2D

from plateau_lib.book.plots import PAGE_WIDTH, PAPER_COLOUR
from plateau_lib.icl.development import (PAPER_BOUNDARIES, PAPER_DELTA_RIDGE, PAPER_EVAL_LOSS, PAPER_LLC, PAPER_LLC_SEEDS,
                                         PAPER_STEPS, PAPER_WEIGHT_NORM)
from plateau_lib.icl.stages_page import (LABELS, frame_indices, from_paper_step,
                                         layer_head_scores, made_on_cpu, run_steps)

STAGE_SHADES = ("#ffffff", "#e3ebf4")  # stage 1 unshaded, then alternating


def shade_stages(ax, boundaries, last_step: int, paper_lines=None, label: bool = False) -> None:
    """Shade alternate stages (x = step + 1) between ``boundaries``; ``paper_lines``: the paper's boundaries
    at the same fraction of this run, drawn dotted; ``label`` numbers the stages at the top of ``ax``."""
    edges = [0, *sorted(boundaries), last_step]
    for i, (a, b) in enumerate(zip(edges[:-1], edges[1:])):
        ax.axvspan(a + 1, b + 1, color=STAGE_SHADES[i % 2], lw=0, zorder=0)
        if label:
            ax.text(math.sqrt((a + 1) * (b + 1)), 0.97, str(i + 1), transform=ax.get_xaxis_transform(),
                    ha="center", va="top", fontsize=9, color="#33475b")
    for s in boundaries:
        ax.axvline(s + 1, color="#33475b", lw=0.8, zorder=1)
    for s in paper_lines if paper_lines is not None else ():
        ax.axvline(s + 1, color=PAPER_COLOUR, lw=1.0, ls=":", zorder=1)

MARKERS = (  # (key, title, y label, log y)
    ("pred_sq", "mean-square prediction (LR1)", "mean ŷ²", True),
    ("icl", "ICL scores (LR2)", "loss difference", False),
    ("delta_ridge", "Δ to ridge", "mean squared distance", False),
    ("ood", "loss on scaled inputs / tasks (g = 5)", "MSE", False),
    ("weight_norm", "weight norm", "L2 norm", False),
    ("ln", "layer-norm weights (LR3–LR4)", "mean |weight|", False),
    ("sv", "embedding singular values", "singular value", False),
    ("heads", "attention-head types", "attention weight", False),
)


def _marker(ax, key: str, dev) -> None:
    m = dev.train.metrics.sort_values("step").assign(x=lambda f: f["step"] + 1)
    s = dev.structure.sort_values("step").assign(x=lambda f: f["step"] + 1)
    if key == "pred_sq":
        ax.plot(m["x"], m["pred_sq"], color="C0")
        noise = dev.train.config["task_kwargs"].get("noise_var")
        if noise:
            ax.axhline(noise, color="grey", ls="--", lw=1, label="σ²")
            ax.legend(loc="upper right")
    elif key == "icl":
        for column, label in (("icl_score", "ℓ_K − ℓ_1"), ("icl_1_D", "ℓ_D − ℓ_1"), ("icl_D_K", "ℓ_K − ℓ_D")):
            ax.plot(m["x"], m[column], label=label)
        ax.legend(loc="lower left", ncols=1)
    elif key == "delta_ridge":
        ax.plot(m["x"], m["delta_ridge"], color="C0")
    elif key == "ood":
        ax.plot(m["x"], m["loss_ood_inputs"], label="inputs × g")
        ax.plot(m["x"], m["loss_ood_tasks"], label="tasks × g")
        ax.legend(loc="lower left")
    elif key == "weight_norm":
        ax.plot(m["x"], m["weight_norm"], color="C0")
    elif key == "ln":
        for i, column in enumerate(c for c in s.columns if c.startswith("ln ")):
            ax.plot(s["x"], s[column], label=column.removeprefix("ln ").replace("blocks.", "block "), color=f"C{i}")
        ax.legend(loc="best", ncols=2, handlelength=1.2, columnspacing=0.8)
    elif key == "sv":
        for kind, colour in (("token", "Blues_r"), ("position", "Oranges_r")):
            columns = [c for c in s.columns if c.startswith(f"{kind} sv")]
            shades = sns.color_palette(colour, len(columns) + 2)
            for i, column in enumerate(columns):
                ax.plot(s["x"], s[column], color=shades[i], label=f"{kind} sv1–{len(columns)}" if i == 0 else None)
        ax.legend(loc="upper left")
    elif key == "heads":
        kinds, styles = ["previous token", "previous x", "previous y"], ["-", "--", ":", "-."]
        heads = layer_head_scores(dev.train)
        for (layer, kind), group in heads.groupby(["layer", "type"]):
            ax.plot(group["step"] + 1, group["weight"], color=f"C{kinds.index(kind)}",
                    ls=styles[(int(layer.split()[-1]) - 1) % len(styles)])
        layers = sorted(heads["layer"].unique())
        handles = [plt.Line2D([], [], color=f"C{i}", label=k) for i, k in enumerate(kinds)]
        handles += [plt.Line2D([], [], color="black", ls=styles[i % len(styles)], label=name)
                    for i, name in enumerate(layers)]
        ax.legend(handles=handles, loc="upper left", ncols=2, handlelength=1.5, columnspacing=0.8)
        ax.set_ylim(0, 1.02)


def show_stored_run(shown: dict, found: dict, which: str, live: str) -> None:
    """The stages figure of a stored run (``which``: "cpu_long" or "paper") under its own heading: drawn if
    it is shown and not this build's live run, else a line saying where it is or why it is missing."""
    from IPython.display import Markdown, display
    if which in shown and live != which:
        cpu = ", computed on a CPU, λ̂ at a reduced budget" if made_on_cpu(shown[which]) else ""
        stages_figure(shown[which], found[which],
                      title=f"{LABELS[which]}: {run_steps(shown[which]):,} steps (committed{cpu})")
    elif live == which:
        display(Markdown(f"This build's live run is the {LABELS[which]}: its figure is in the live run's section."))

PAPER_MARKERS = {"delta_ridge": PAPER_DELTA_RIDGE, "weight_norm": PAPER_WEIGHT_NORM}  # the authors' logged seed 1


def _paper_points(ax, values: dict, label: str | None = None) -> None:
    """The published run's values ``{step: value}`` as crosses on ``ax`` (x: step + 1, as our curves)."""
    ax.plot(np.array(list(values)) + 1, list(values.values()), "x", color=PAPER_COLOUR, ms=7, mew=2, label=label)


def stages_figure(dev, stages, title: str = ""):
    """Hoogland Fig. 1(b) for one run: λ̂ (± se at each checkpoint, GP mean) and the evaluation loss over
    log(step + 1), the detected stages shaded and numbered, the paper's boundaries at the same fraction of the
    schedule dotted; below, each marker of reference §4.2 on the same x-axis (two per row). A run of the paper's
    500k steps also shows the authors' logged seed 1 (λ̂, loss, Δ to ridge, weight norm) as crosses, and their
    seeds' range of λ̂."""
    steps = run_steps(dev)
    last = int(max(dev.llc["step"].max(), dev.train.metrics["step"].max()))
    paper_lines = from_paper_step(PAPER_BOUNDARIES, steps)
    rows = 2 + math.ceil(len(MARKERS) / 2)
    fig = plt.figure(figsize=(PAGE_WIDTH, 1.9 * 2 + 1.75 * (rows - 2)), constrained_layout=True)
    grid = fig.add_gridspec(rows, 2, height_ratios=[1.25, 1.0] + [1.0] * (rows - 2))
    top = fig.add_subplot(grid[0, :])
    loss_ax = fig.add_subplot(grid[1, :], sharex=top)
    marker_axes = [fig.add_subplot(grid[2 + i // 2, i % 2], sharex=top) for i in range(len(MARKERS))]
    llc = dev.llc.sort_values("step")
    top.errorbar(llc["step"] + 1, llc["llc_mean"], yerr=llc["llc_se"].fillna(0), fmt="o", ms=3.5, color="C0", lw=1,
                 label="λ̂ ± se (chains)")
    longer = llc[llc["budget"] != "reduced"] if "budget" in llc else llc.iloc[:0]
    if len(longer):
        top.plot(longer["step"] + 1, longer["llc_mean"], "D", ms=5, color="C2",
                 label=f"{longer['budget'].iloc[0]} (reduced budget failed)")
    top.plot(stages.steps + 1, stages.smooth, color="C1", lw=1.5, label="GP mean")
    paper_run = steps == PAPER_STEPS  # the paper's schedule: its published values sit at the same steps
    if paper_run:
        low, high = zip(*PAPER_LLC_SEEDS.values())
        top.vlines(np.array(list(PAPER_LLC_SEEDS)) + 1, low, high, color=PAPER_COLOUR, lw=2.5, alpha=0.35,
                   label="paper, seeds 0–4 (range)")
        _paper_points(top, PAPER_LLC, "paper, seed 1")
    top.plot([], [], color=PAPER_COLOUR, ls=":", label="paper's boundaries")
    top.set(ylabel="λ̂", title="local learning coefficient")
    # the legend goes above the curve, in the room the raised limit leaves, under the stage numbers
    top.set_ylim(top=1.9 * max(float(llc["llc_mean"].max()), max(PAPER_LLC.values()) if paper_run else 0))
    top.legend(loc="upper left", bbox_to_anchor=(0, 0.9), ncols=3, columnspacing=1.0, handlelength=1.5)
    m = dev.train.metrics.sort_values("step")
    loss_ax.plot(m["step"] + 1, m["loss"], color="C0", label="transformer")
    loss_ax.plot(m["step"] + 1, m["loss_ridge"], color="grey", ls="--", lw=1, label="ridge (Bayes)")
    if paper_run:
        _paper_points(loss_ax, PAPER_EVAL_LOSS, "paper, seed 1")
    loss_ax.set(ylabel="MSE", title="evaluation loss (held-out batch, per token)")
    loss_ax.legend(loc="upper right")
    shade_stages(top, stages.boundaries, last, paper_lines, label=True)
    shade_stages(loss_ax, stages.boundaries, last, paper_lines)
    for ax, (key, panel, ylabel, log) in zip(marker_axes, MARKERS):
        _marker(ax, key, dev)
        if paper_run and key in PAPER_MARKERS:
            _paper_points(ax, PAPER_MARKERS[key])
        shade_stages(ax, stages.boundaries, last, paper_lines)
        ax.set(title=panel, ylabel=ylabel)
        if log:
            ax.set_yscale("log")
    top.set_xscale("log")
    top.set_xlim(1, last + 1)
    for ax in [top, loss_ax, *marker_axes[:-2]]:
        ax.tick_params(labelbottom=False)
    for ax in marker_axes[-2:]:
        ax.set_xlabel("training step + 1 (log scale)")
    if title:
        fig.suptitle(title)
    return fig



FIVE_SEEDS_ZOOM = (30_000, 510_000)  # the right panel's linear steps: LR3-LR5, where λ̂ falls and levels


def five_seeds_figure(curves: dict, authors: dict, title: str = ""):
    """λ̂ of the paper's configuration at each model seed: ``curves`` ``{seed: λ̂ by step}`` at the stages page's
    budget (lines), ``authors`` ``{seed: λ̂ by step}`` by the authors' estimator (circles, the same colour), the
    paper's five-seed range at each logged step (bars) and its boundaries (dotted). Left: the whole run on a log
    axis; right: LR3-LR5 on a linear one, where the fall is readable."""
    seeds = sorted(set(curves) | set(authors))
    colours = dict(zip(seeds, sns.color_palette("colorblind", len(seeds))))
    fig, axes = plt.subplots(1, 2, figsize=(PAGE_WIDTH, 3.6), constrained_layout=True,
                             gridspec_kw={"width_ratios": [1, 1.25]})
    low, high = (np.array(v) for v in zip(*PAPER_LLC_SEEDS.values()))
    logged = np.array(list(PAPER_LLC_SEEDS))
    for ax, log in zip(axes, (True, False)):
        x = logged + 1 if log else logged
        ax.vlines(x, low, high, color=PAPER_COLOUR, lw=6, alpha=0.35, label="paper, seeds 0–4 (range)")
        for seed in seeds:
            if seed in curves:
                c = curves[seed].sort_index()
                ax.plot(c.index + 1 if log else c.index, c.to_numpy(), color=colours[seed], lw=1.3)
            if seed in authors:
                a = authors[seed].sort_index()
                ax.plot(a.index + 1 if log else a.index, a.to_numpy(), "o", color=colours[seed], ms=6, mec="black",
                        mew=0.6)
        for step in PAPER_BOUNDARIES:
            ax.axvline(step + 1 if log else step, color=PAPER_COLOUR, lw=1.0, ls=":", zorder=0)
    axes[0].set(xscale="log", xlim=(50, PAPER_STEPS + 1), xlabel="training step + 1 (log scale)", ylabel="λ̂",
                title="the whole run")
    axes[1].set(xlim=FIVE_SEEDS_ZOOM, ylim=(90, 180), xlabel="training step", title="LR3–LR5 (linear steps)")
    axes[1].xaxis.set_major_formatter(lambda v, _: f"{v / 1000:.0f}k")
    for step, stage in zip(PAPER_BOUNDARIES[1:], ("LR3", "LR4", "LR5")):
        axes[1].text(step, 178, f" {stage}", ha="left", va="top", fontsize=9, color="#33475b")
    keys = [Line2D([], [], color=colours[seed], lw=2, label=f"seed {seed}") for seed in seeds] + [
        Line2D([], [], color="0.4", lw=1.3, label="the stages page's budget"),
        Line2D([], [], color="0.6", marker="o", mec="black", mew=0.6, ls="", label="the authors' estimator"),
        Line2D([], [], color=PAPER_COLOUR, lw=6, alpha=0.35, label="paper, seeds 0–4 (range)")]
    fig.legend(handles=keys, loc="outside lower center", ncols=4, frameon=False)
    if title:
        fig.suptitle(title)
    return fig


def rule_figure(stages, steps: int, slope_tol: float, title: str = ""):
    """The stage rule on one curve (``stages``: ``stages_page.detect_stages``), over log(step + 1): λ̂ at each
    checkpoint with its GP mean, the boundaries kept (solid) and the paper's at the same fraction of the run's
    ``steps`` (dotted); below, |dλ̂ / dlog(step + 1)| of the GP mean with the tolerance ``slope_tol`` dashed, every
    candidate circled and the kept ones filled."""
    x = stages.steps + 1
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(PAGE_WIDTH, 6.2), sharex=True, constrained_layout=True,
                                      height_ratios=[1.2, 1.0])
    top.plot(x, stages.values, "o", ms=3.5, color="C0", label="λ̂ at a checkpoint")
    top.plot(x, stages.smooth, color="C1", lw=1.5, label="GP mean")
    bottom.plot(x, np.abs(stages.slope), color="C1", lw=1.5, label="|slope| of the GP mean")
    bottom.axhline(slope_tol, color="#33475b", ls="--", lw=1, label=f"tolerance {slope_tol:g}")
    at = dict(zip(stages.steps, np.abs(stages.slope)))
    bottom.plot([c + 1 for c in stages.candidates], [at[c] for c in stages.candidates], "o", mfc="none", ms=8,
                color="#33475b", label="candidate")
    bottom.plot([b + 1 for b in stages.boundaries], [at[b] for b in stages.boundaries], "o", ms=6, color="#33475b",
                label="boundary kept")
    for ax in (top, bottom):
        shade_stages(ax, stages.boundaries, int(stages.steps.max()), from_paper_step(PAPER_BOUNDARIES, steps))
    top.plot([], [], color=PAPER_COLOUR, ls=":", label="paper's boundaries")
    top.set(ylabel="λ̂", title="λ̂ and its GP fit")
    bottom.set(ylabel="|dλ̂ / dlog(step + 1)|", yscale="log", xscale="log", xlabel="training step + 1 (log scale)",
               title="the slope the rule reads")
    bottom.set_xlim(x.min() / 1.5, x.max() * 1.5)
    top.legend(loc="upper left", ncols=2)
    bottom.legend(loc="lower left", ncols=2)
    if title:
        fig.suptitle(title)
    return fig


def heads_figure(dev, stages, title: str = ""):
    """For each layer and each type (previous token, previous x, previous y), the largest attention weight any head
    puts on it over training, against log(step + 1), with the λ̂ stages of ``stages`` shaded and the paper's
    boundaries at the same fraction of the schedule dotted."""
    fig, ax = plt.subplots(figsize=(PAGE_WIDTH, 3.8), constrained_layout=True)
    _marker(ax, "heads", dev)
    ax.legend(handles=ax.get_legend().legend_handles, loc="center left", ncols=2, handlelength=1.5)  # clear of stage 1
    last = int(max(dev.llc["step"].max(), dev.train.metrics["step"].max()))
    shade_stages(ax, stages.boundaries, last, from_paper_step(PAPER_BOUNDARIES, run_steps(dev)), label=True)
    ax.set(xscale="log", xlim=(1, last + 1), ylim=(0, 1.12), ylabel="largest attention weight",
           xlabel="training step + 1 (log scale)")
    if title:
        ax.set_title(title)
    return fig

def checkpoint_frame(train, index: int, sequences: int = 3, title: str = ""):
    """One widget frame at evaluation ``index``: every head's batch-mean attention (rows: layers), and for
    ``sequences`` held-out sequences the model's prediction at each token against ridge's and the target;
    last, the per-token loss and Δ to ridge on the whole evaluation batch. Fixed margins instead of the
    constrained layout: a frame renders in about half the time."""
    arrays = train.arrays
    step = int(arrays["step"][index])
    attn = np.asarray(arrays["attn"][index])  # (L, H, 2K, 2K)
    L, H, T, _ = attn.shape
    top_in, bottom_in = 1.6 * L, 2.2
    height = top_in + bottom_in + 1.5
    fig = plt.figure(figsize=(PAGE_WIDTH, height), layout="none")

    def y(inches):  # the figure fraction of a distance from the top
        return 1 - inches / height

    grid = fig.add_gridspec(L, H, left=0.08, right=0.86, top=y(0.55), bottom=y(0.55 + top_in), hspace=0.45,
                            wspace=0.08)
    names = [f"{'xy'[t % 2]}{t // 2 + 1}" for t in range(T)]
    ticks = list(range(0, T, 4))
    for layer in range(L):
        for h in range(H):
            ax = fig.add_subplot(grid[layer, h])
            image = ax.imshow(attn[layer, h], vmin=0, vmax=1, cmap="viridis", aspect="auto")
            ax.set_title(f"layer {layer + 1}, head {h + 1}", fontsize=9, pad=3)
            ax.set_xticks(ticks, [names[t] for t in ticks] if layer == L - 1 else [])
            ax.set_yticks(ticks, [names[t] for t in ticks] if h == 0 else [])
            ax.grid(False)
    fig.colorbar(image, cax=fig.add_axes((0.88, y(0.55 + top_in), 0.015, top_in / height)), label="attention")
    fig.text(0.01, y(0.55 + top_in / 2), "query", rotation=90, va="center", fontsize=9)
    fig.text(0.47, y(0.93 + top_in), "key", ha="center", va="bottom", fontsize=9)
    bottom = fig.add_gridspec(1, sequences + 1, left=0.08, right=0.98, top=y(1.65 + top_in), bottom=y(height - 0.45),
                              wspace=0.35)
    panels = [fig.add_subplot(bottom[0, j]) for j in range(sequences + 1)]
    K = np.asarray(arrays["pred"]).shape[-1]
    k = np.arange(1, K + 1)
    for j, ax in enumerate(panels[:-1]):
        ax.plot(k, arrays["y"][index][j], "o", color="black", ms=3.5, label="target y")
        ax.plot(k, arrays["pred"][index][j], color="C0", label="model")
        ax.plot(k, arrays["pred_ridge"][index][j], color="C1", ls="--", label="ridge")
        ax.set(title=f"sequence {j + 1}", xlabel="token k", xticks=k[::2])
    panels[0].set_ylabel("prediction")
    fig.legend(*panels[0].get_legend_handles_labels(), loc="center", bbox_to_anchor=(0.5, y(1.2 + top_in)), ncols=3)
    tokens = train.positions[train.positions["step"] == step].sort_values("token")
    ax = panels[-1]
    ax.plot(tokens["token"], tokens["loss"], color="C0", label="loss")
    ax.plot(tokens["token"], tokens["delta_ridge"], color="C2", label="Δ to ridge")
    ax.set(title="per token (batch)", xlabel="token k", xticks=k[::2])
    ax.legend(loc="best", handlelength=1.2)
    fig.suptitle(f"{title}step {step}" if title else f"step {step}", y=y(0.12), va="top")
    return fig


def checkpoint_frames(train, n: int = 8, sequences: int = 3, title: str = "") -> dict:
    """``{"step s": figure}`` at about ``n`` evaluations for ``widgets.image_selector``."""
    steps = np.asarray(train.arrays["step"])
    return {f"step {int(steps[i])}": checkpoint_frame(train, i, sequences, title) for i in frame_indices(steps, n)}
