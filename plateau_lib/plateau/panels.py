"""The loss-plateau pages' live panels (``book.panels.try_it``): their controls, ranges and run functions."""
from __future__ import annotations

import ipywidgets as widgets
import pandas as pd

from plateau_lib.book import plots
from plateau_lib.book.panels import try_it
from plateau_lib.engine import cache
from plateau_lib.plateau import presets

MWS_NOTE = ("A Run takes about 5 s at width 32 and 300 steps, and about 17 s at width 64 and 600 steps (the miniature), "
            "on one core; the paper's width 256 is for a papermill re-run (-p preset paper).")


def mws_run(lr: float, d_model: int, seed: int, steps: int, progress: bool = True):
    """Fig. 2 live: the MWS miniature with these values (through the cache), its curves beside the committed
    ``cpu`` run of seed 0. Returns the figure and the new run's result."""
    cfg = presets.mws_config("cpu", lr=lr, d_model=d_model, steps=steps).replace(seed=seed)
    result = cache.cached_train(cfg, progress=progress)
    label = f"this run (lr {lr:.2g}, width {d_model}, seed {seed})"
    frames = [result.metrics.assign(run=label)]
    committed = cache.load_committed(presets.seed_runs("cpu")[0])
    if committed is not None:
        frames.insert(0, committed.metrics.assign(run="committed cpu run (seed 0)"))
    fig = plots.training_curves(pd.concat(frames, ignore_index=True), hue="run", title="MWS: your run")
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
    return try_it(controls, mws_run, static=static, note=MWS_NOTE, live=live)
