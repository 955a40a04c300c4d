"""The in-context regression pages' live panels (``book.panels.try_it``): the stages and transient-ridge miniatures
with a Run button, and the low-M page's Bayes predictors, which are instant and redraw at every change."""
from __future__ import annotations

import ipywidgets as widgets
import matplotlib.pyplot as plt
import pandas as pd
import torch

from plateau_lib.book.panels import trained_beside, try_it
from plateau_lib.book.plots import PAGE_WIDTH
from plateau_lib.engine.tasks import make_task
from plateau_lib.icl import baselines, diversity, presets

STYLE = {"description_width": "initial"}


def _curves_figure(frames: pd.DataFrame, columns: dict, title: str):
    """One panel per column of ``frames`` against the step (symlog), one line per ``run``."""
    fig, axes = plt.subplots(1, len(columns), figsize=(PAGE_WIDTH, 3.0), constrained_layout=True)
    for ax, (column, label) in zip(axes, columns.items()):
        for run, g in frames.groupby("run", sort=False):
            ax.plot(g["step"], g[column], lw=1.5, label=run)
        ax.set_xscale("symlog", linthresh=10)
        ax.set(xlabel="step", ylabel=label)
    axes[0].legend(fontsize="small")
    fig.suptitle(title)
    return fig


def stages_run(steps: int, d_model: int, seed: int = 1, progress: bool = True):
    """The stages page live: the miniature of ``ICL_CPU`` at this width and length (the one-cycle schedule
    follows the length), its loss and Δ to ridge beside the committed long CPU run's."""
    base = presets.ICL_CPU
    cfg = base.replace(steps=steps, d_model=d_model, seed=seed, checkpoint_steps=(),
                       eval_steps=presets.log_linear_steps(steps, *presets.ICL_CHECKPOINTS["cpu"]))
    result, committed = trained_beside(cfg, presets.ICL_CPU_LONG, progress)
    frames = [result.metrics.assign(run=f"this run ({steps:,} steps, width {d_model})")]
    if committed is not None:
        frames.insert(0, committed.metrics.assign(run="committed long CPU run (20k steps)"))
    fig = _curves_figure(pd.concat(frames, ignore_index=True), {"loss": "loss (per token)", "delta_ridge": "Δ to ridge"},
                         "In-context regression: your run")
    return fig, result


def stages_panel(static: widgets.Widget | None = None, live: bool | None = None) -> widgets.Widget:
    """The stages page's panel: steps and width."""
    controls = {"steps": widgets.IntSlider(value=1_500, min=500, max=3_000, step=250, description="steps", style=STYLE),
                "d_model": widgets.Dropdown(options=[16, 32, 64], value=32, description="width", style=STYLE)}
    return try_it(controls, stages_run, static=static, live=live)


PANEL_MS = {"1": 1, "2": 2, "4": 4, "8": 8, "16": 16, "32": 32, "∞": presets.INF}


def ridge_run(M: str, steps: int, progress: bool = True):
    """The transient-ridge and task-diversity pages live: one M of the ``cpu`` sweep at this length; its OOD loss
    and Δ to dMMSE_M and to ridge over training, with dMMSE_M's and ridge's OOD losses as levels."""
    if M not in PANEL_MS:
        raise ValueError(f"M must be one of {list(PANEL_MS)}, got {M!r}")
    value = PANEL_MS[M]
    configs, _ = presets.diversity("cpu", Ms=[value], overrides={"steps": steps, "eval_steps": presets.log_linear_steps(
        steps, 12, 6)})
    cfg = next(iter(configs.values()))
    result, _ = trained_beside(cfg, progress=progress)
    curve = diversity.curves({(value, 0): result}).assign(run=f"M = {M}")
    fig = _curves_figure(curve, {"ood_loss": "OOD loss (Gaussian tasks)", "delta_dmmse": "Δ to dMMSE_M (q_M)",
                                 "delta_ridge": "Δ to ridge (q_M)"}, f"M = {M}, {steps:,} steps")
    axes = fig.axes
    axes[0].axhline(curve["ood_dmmse"].iloc[-1], ls="--", c="grey", lw=1, label="dMMSE_M")
    axes[0].axhline(curve["ood_ridge"].iloc[-1], ls=":", c="crimson", lw=1.4, label="ridge")
    axes[0].legend(fontsize="small")
    return fig, result


def ridge_panel(static: widgets.Widget | None = None, live: bool | None = None) -> widgets.Widget:
    """The transient-ridge and task-diversity pages' panel: M and steps."""
    controls = {"M": widgets.Dropdown(options=list(PANEL_MS), value="8", description="M (tasks)", style=STYLE),
                "steps": widgets.IntSlider(value=1_500, min=500, max=3_000, step=250, description="steps",
                                           style=STYLE)}
    return try_it(controls, ridge_run, static=static, live=live)


def low_m_run(M: int, K: int, noise_var: float, D: int = 2, n: int = 2048, seed: int = 0):
    """The low-M page live: the two Bayes predictors on q_M, token by token. The loss of dMMSE_M (the posterior
    mean over the M tasks) and of ridge (the Gaussian prior's), and the noise floor σ²: with few tasks dMMSE_M
    reaches the floor after a few tokens, while ridge needs about D. Returns the figure and the values drawn."""
    task = make_task("icl_regression", D=D, K=K, noise_var=noise_var, M=M)
    xs, ys, _ = task.sample(n, torch.Generator().manual_seed(seed))
    dmmse = baselines.dmmse_predict(xs, ys, task.tasks(), noise_var)
    ridge = baselines.ridge_predict(xs, ys, noise_var)
    tokens = range(1, K + 1)
    fig, ax = plt.subplots(figsize=(PAGE_WIDTH * 0.75, 3.2), constrained_layout=True)
    ax.plot(tokens, (dmmse - ys).square().mean(0), "o-", label=f"dMMSE$_{{{M}}}$")
    ax.plot(tokens, (ridge - ys).square().mean(0), "s-", label="ridge")
    ax.axhline(noise_var, ls=":", c="grey", label="noise σ²")
    ax.set(xlabel="token k", ylabel="loss on q_M", title=f"M = {M}, K = {K}, σ² = {noise_var:g} (D = {D})")
    ax.legend(fontsize="small")
    return fig, {"M": M, "K": K, "noise_var": noise_var, "D": D}


def low_m_panel(static: widgets.Widget | None = None, live: bool | None = None) -> widgets.Widget:
    """The low-M page's panel: M, the context length K and the noise σ²; continuous."""
    controls = {"M": widgets.IntSlider(value=2, min=1, max=32, description="M (tasks)", continuous_update=False,
                                       style=STYLE),
                "K": widgets.IntSlider(value=8, min=2, max=32, description="K (context)", continuous_update=False,
                                       style=STYLE),
                "noise_var": widgets.FloatLogSlider(value=0.125, base=10, min=-3, max=0, step=0.125,
                                                    description="σ²", readout_format=".3g", continuous_update=False,
                                                    style=STYLE)}
    return try_it(controls, low_m_run, static=static, continuous=True, live=live)
