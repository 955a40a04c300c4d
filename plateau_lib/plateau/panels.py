"""The loss-plateau pages' live panels (``book.panels.try_it``): their controls, ranges and run functions."""
from __future__ import annotations

import ipywidgets as widgets
import pandas as pd

from plateau_lib.book import plots
from plateau_lib.book.pages import copied_runs
from plateau_lib.book.panels import trained_beside, try_it
from plateau_lib.engine.cache import current
from plateau_lib.engine.runs import COPY_GROUPS
from plateau_lib.plateau import presets


def beside_committed(result, label: str, committed, committed_label: str, title: str, curves=plots.CURVES):
    """The training curves of ``result`` (labelled ``label``) beside those of the committed run ``committed`` (left
    out when None): the figure every Run-button panel of this chapter draws."""
    frames = [result.metrics.assign(run=label)]
    if committed is not None:
        frames.insert(0, committed.metrics.assign(run=committed_label))
    return plots.training_curves(pd.concat(frames, ignore_index=True), hue="run", curves=curves, title=title)


def mws_run(lr: float, d_model: int, seed: int, steps: int, progress: bool = True):
    """Fig. 2 live: the MWS miniature with these values (through the cache), its curves beside the committed
    ``cpu`` run of seed 0. Returns the figure and the new run's result."""
    cfg = presets.mws_config("cpu", lr=lr, d_model=d_model, steps=steps).replace(seed=seed)
    result, committed = trained_beside(cfg, presets.seed_runs("cpu")[0], progress)
    fig = beside_committed(result, f"this run (lr {lr:.2g}, width {d_model}, seed {seed})", committed,
                           "committed cpu run (seed 0)", "MWS: your run")
    return fig, result


def mws_panel(static: widgets.Widget | None = None, live: bool | None = None) -> widgets.Widget:
    """Fig. 2's panel: learning rate, width, seed and steps. The defaults are the committed run's first 300 steps,
    so a first Run retraces it; then change one knob."""
    style = {"description_width": "initial"}
    controls = {
        "lr": widgets.FloatLogSlider(value=1e-3, base=10, min=-4, max=-2.5, step=0.25, description="Adam lr",
                                     readout_format=".1e", style=style),
        "d_model": widgets.Dropdown(options=[16, 32, 64], value=64, description="width", style=style),
        "seed": widgets.IntSlider(value=0, min=0, max=9, description="seed", style=style),
        "steps": widgets.IntSlider(value=300, min=100, max=600, step=50, description="steps", style=style)}
    return try_it(controls, mws_run, static=static, live=live)


def bias_run(c: float, switch_step: int, seed: int, steps: int, progress: bool = True):
    """Figs. 3-4 and 43 live: the miniature with its Ω attention scores multiplied by ``c`` from ``switch_step`` on
    (0: from the start), beside the committed unbiased run (c = 1, seed 0). Returns the figure and the result."""
    if switch_step >= steps:
        raise ValueError(f"the switch step ({switch_step}) must be below steps ({steps})")
    cfg = presets.mws_config("cpu", steps=steps).replace(attn_bias_c=float(c), attn_bias_from=int(switch_step),
                                                         seed=seed)
    result, committed = trained_beside(cfg, presets.seed_runs("cpu")[0], progress)
    fig = beside_committed(result, f"this run (c {c:g} from step {switch_step}, seed {seed})", committed,
                           "committed cpu run (c = 1, seed 0)", "Attention bias: your run")
    return fig, result


def bias_panel(static: widgets.Widget | None = None, live: bool | None = None) -> widgets.Widget:
    """Figs. 3-4/43's panel: the bias c and the step it is switched on at."""
    style = {"description_width": "initial"}
    controls = {
        "c": widgets.SelectionSlider(options=[0.2, 0.5, 1.0, 2.5, 5.0, 10.0], value=10.0, description="bias c",
                                     style=style),
        "switch_step": widgets.IntSlider(value=0, min=0, max=250, step=25, description="switched on at step",
                                         style=style),
        "seed": widgets.IntSlider(value=0, min=0, max=9, description="seed", style=style),
        "steps": widgets.IntSlider(value=300, min=100, max=600, step=50, description="steps", style=style)}
    return try_it(controls, bias_run, static=static, live=live)


def task_run(task: str, steps: int, progress: bool = True):
    """The other tasks live: ``task``'s miniature for ``steps`` steps, beside its committed ``cpu`` run (the
    steps slider stops at the committed run's length). Returns the figure and the result."""
    base = presets.other_task_runs("cpu", [task])[task]
    if not 1 <= steps <= base.steps:
        raise ValueError(f"steps must be between 1 and the {task} miniature's {base.steps}, got {steps}")
    cfg = base.replace(steps=steps, eval_every=max(1, steps // 50))
    result, committed = trained_beside(cfg, base, progress)
    curves = [c for c in plots.CURVES if c[0] in ("loss", "acc", "cosine")]
    fig = beside_committed(result, f"this run ({steps} steps)", committed, f"committed cpu run ({base.steps} steps)",
                           task, curves)
    return fig, result


def task_panel(static: widgets.Widget | None = None, live: bool | None = None) -> widgets.Widget:
    """The other tasks' panel: the task and its number of steps."""
    style = {"description_width": "initial"}
    controls = {"task": widgets.Dropdown(options=list(presets.OTHER_TASKS), value="prefix sum", description="task",
                                         style=style),
                "steps": widgets.IntSlider(value=300, min=20, max=1000, step=20, description="steps", style=style)}
    return try_it(controls, task_run, static=static, live=live)


def init_run(groups, seed: int, steps: int, progress: bool = True):
    """Fig. 5 live: the miniature with ``groups`` copied from the trained reference (seed 0) and frozen, the rest
    freshly initialised with ``seed``, beside the committed baseline (nothing copied, seed 1)."""
    reference, runs = presets.optimal_init_runs("cpu", seeds=[seed], conditions={"this run": list(groups)},
                                                steps=steps)
    _, results = copied_runs(reference.replace(steps=presets.MWS_CPU.steps), {"this run": runs[("this run", seed)]})
    result = results["this run"]
    name = "+".join(groups) if groups else "nothing"
    _, committed_runs = presets.optimal_init_runs("cpu")
    committed = current().committed_result(committed_runs[("baseline", 1)])
    fig = beside_committed(result, f"this run ({name} copied, seed {seed})", committed,
                           "committed baseline (nothing copied, seed 1)", "Optimal initialisation: your run")
    return fig, result


def init_panel(static: widgets.Widget | None = None, live: bool | None = None) -> widgets.Widget:
    """Fig. 5's panel: which parameter groups are copied (and frozen), the seed and the steps."""
    style = {"description_width": "initial"}
    controls = {
        "groups": widgets.SelectMultiple(options=list(COPY_GROUPS), value=("kq", "embed"),
                                         description="copied groups", rows=len(COPY_GROUPS), style=style),
        "seed": widgets.IntSlider(value=1, min=1, max=9, description="seed", style=style),
        "steps": widgets.IntSlider(value=300, min=100, max=600, step=50, description="steps", style=style)}
    return try_it(controls, init_run, static=static, live=live)
