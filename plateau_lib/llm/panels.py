"""The collapse page's live panel (``book.panels.try_it``): one model, one checkpoint and one prompt at a time.

The page's heat-maps average the 8 x 8 cosines over every prompt; here a reader walks through the analysed
checkpoints and the ARC-Easy prompts one by one and sees that prompt's own cosines, its greedy continuation and
its repetition. Everything comes from the committed tables, so it redraws at once (continuous, no Run button).
"""
from __future__ import annotations

import ipywidgets as widgets
import matplotlib.pyplot as plt

from plateau_lib.book.panels import try_it
from plateau_lib.book.plots import PAGE_WIDTH
from plateau_lib.llm.corpus import prompts
from plateau_lib.llm.page import shown_text, step_heatmap

STYLE = {"description_width": "initial"}


def collapse_run(panels: list, model: str, step: int, prompt: int):
    """One prompt at one checkpoint of the model labelled ``model``: its 8 x 8 cosine heat-map (the states of the
    8 greedy generation steps), beside the prompt, the continuation and its repetition and distinct fraction.
    ``prompt`` counts from 1. ValueError (naming the parameter and what is allowed) for anything not analysed."""
    by_label = {p.label: p for p in panels}
    if model not in by_label:
        raise ValueError(f"parameter 'model' must be one of {sorted(by_label)}, got {model!r}")
    panel = by_label[model]
    steps, n = sorted(panel.rows["step"].unique()), int(panel.rows["prompt"].max()) + 1
    if step not in steps:
        raise ValueError(f"parameter 'step' must be an analysed checkpoint of {model} {[int(s) for s in steps]}, got {step!r}")
    if not 1 <= prompt <= n:
        raise ValueError(f"parameter 'prompt' must be between 1 and {n}, got {prompt!r}")
    rows = panel.rows[panel.rows["prompt"] == prompt - 1]
    row = rows[rows["step"] == step].iloc[0]
    question = prompts(n, panel.meta.get("spec", {}).get("prompt_seed", 0))[prompt - 1]
    fig, (ax, text) = plt.subplots(1, 2, figsize=(PAGE_WIDTH, 3.4), width_ratios=[1, 1.4], constrained_layout=True)
    step_heatmap(ax, panel, step, prompt=prompt - 1)
    lines = [f"prompt {prompt} of {n} (ARC-Easy):", *_wrap(question, 48), "", "greedy continuation:",
             f"“{shown_text(row['text'])}”", "",
             f"repetition {row['repetition']:.2f}, distinct {row['distinct']:.2f}",
             f"smallest logit margin {row['margin']:.2g}"]
    text.text(0, 1, "\n".join(lines), va="top", ha="left", fontsize=9, family="monospace")
    text.set_axis_off()
    fig.suptitle(f"{panel.label}: one prompt's last-position states")
    return fig, {"model": model, "step": int(step), "prompt": int(prompt)}


def _wrap(text: str, width: int, lines: int = 4) -> list[str]:
    import textwrap
    out = textwrap.wrap(text, width)
    return out[:lines - 1] + ["…"] if len(out) > lines else out


def collapse_panel(panels: list, static: widgets.Widget | None = None, live: bool | None = None) -> widgets.Widget:
    """The collapse page's panel: the model, the checkpoint (the model's analysed steps) and the prompt;
    continuous. Changing the model offers that model's checkpoints."""
    if not panels:
        raise ValueError("parameter 'panels' must hold at least one analysed model")
    first = panels[0]

    def steps(label: str) -> list[int]:
        return [int(s) for s in sorted(next(p for p in panels if p.label == label).rows["step"].unique())]
    model = widgets.Dropdown(options=[p.label for p in panels], value=first.label, description="model", style=STYLE)
    step = widgets.SelectionSlider(options=steps(first.label), value=steps(first.label)[0], description="checkpoint",
                                   continuous_update=False, style=STYLE)
    prompt = widgets.IntSlider(value=1, min=1, max=int(first.rows["prompt"].max()) + 1, description="prompt",
                               continuous_update=False, style=STYLE)

    def offer_steps(change):
        options = steps(change["new"])
        step.options, step.value = options, min(options, key=lambda s: abs(s - step.value))
    model.observe(offer_steps, names="value")
    return try_it({"model": model, "step": step, "prompt": prompt},
                  lambda **values: collapse_run(panels, **values), static=static, continuous=True, live=live)
