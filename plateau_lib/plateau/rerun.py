"""The loss-plateau pages re-run as another machine might run them: the same configs with every initial weight one
float step up (``TrainConfig.init_nudge``), the rounding difference another machine's order of sums brings. The
escape from a plateau is chaotic, so a verdict that such a re-run turns is *fragile* (``book.summaries``); the
page shows both.

The nudged runs are made and committed by ``python -m plateau_lib rerun --preset P --commit``; a page reads them
committed only, and trains nothing."""
from __future__ import annotations

from plateau_lib.book import pages
from plateau_lib.plateau import milestones, other_tasks, presets, setups


def nudged(configs: dict) -> dict:
    """``{label: TrainConfig}`` with every initial weight one float step up."""
    return {label: cfg.replace(init_nudge=True) for label, cfg in configs.items()}


def plateau_values(results: dict, configs: dict) -> dict:
    """Fig. 2's claims on ``{seed: TrainResult}``, measured as the page measures them."""
    metrics = pages.tidy(results, "seed")
    return milestones.plateau_values(milestones.milestones(metrics), metrics)


def bias_values(results: dict, configs: dict) -> dict:
    """Figs. 3–4's claims on ``{(c, seed): TrainResult}`` (the bias from step 0), as the page measures them."""
    metrics = pages.tidy({(f"{c:g}", s): r for (c, s), r in results.items()}, ("c", "seed"))
    return milestones.attention_bias_values(milestones.milestones(metrics, by=("c", "seed")))


def setup_values(results: dict, configs: dict) -> dict:
    """Figs. 26–40's claims on ``{(setup, seed): TrainResult}``, as the page measures them (the families only
    label the page's panels, so none is needed here)."""
    family = {name: "" for name, _ in configs}
    return setups.setup_values(setups.setup_milestones(setups.setup_metrics(results, family), family))


# figure: (its runs at a preset, {label: TrainConfig}; the page's measure of them, (results, configs) -> values).
# Fig. 2 at both presets; the others at the miniature's (their paper runs are hours on this CPU).
FIGURES = {
    "Fig. 2 (MWS plateau)": (presets.seed_runs, plateau_values),
    "Figs. 3–4 (attention bias)": (lambda preset: presets.attention_bias_runs(preset)[0], bias_values),
    "Figs. 6–22 (other tasks)": (presets.other_task_runs, other_tasks.survey_values),
    "Figs. 26–40 (training setups)": (presets.training_setup_runs, setup_values),
}
PRESETS = {"cpu": tuple(FIGURES), "paper": ("Fig. 2 (MWS plateau)",)}


def configs(figure: str, preset: str) -> dict:
    """``figure``'s runs of ``preset``, nudged."""
    if figure not in FIGURES:
        raise ValueError(f"figure must be one of {list(FIGURES)}, got {figure!r}")
    return nudged(FIGURES[figure][0](preset))


def committed_values(figure: str, shown: dict) -> dict:
    """``{preset: figure's claims on the committed nudged copies of its runs}`` for the ``{preset: {label:
    config}}`` a page shows; a preset with any nudged copy not committed is left out."""
    measure = FIGURES[figure][1]
    values = {}
    for preset, page_configs in shown.items():
        wanted = nudged(page_configs)
        found = pages.committed_runs(wanted)
        if len(found) == len(wanted):
            values[preset] = measure(found, wanted)
    return values
