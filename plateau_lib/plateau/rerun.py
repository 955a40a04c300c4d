"""Fig. 2 re-run as another machine might run it: the same configs with every initial weight one float step up
(``TrainConfig.init_nudge``), the rounding difference another machine's order of sums brings. The escape from a
plateau is chaotic, so a verdict that such a re-run turns is *fragile* (``book.summaries``); the page shows both.

The nudged runs are made and committed by ``python -m plateau_lib rerun --preset P --commit``; a page reads them
committed only, and trains nothing."""
from __future__ import annotations

from plateau_lib.book import pages
from plateau_lib.plateau import milestones, presets

FIGURE = "Fig. 2 (MWS plateau)"


def nudged(configs: dict) -> dict:
    """``{label: TrainConfig}`` with every initial weight one float step up."""
    return {label: cfg.replace(init_nudge=True) for label, cfg in configs.items()}


def configs(preset: str) -> dict:
    """Fig. 2's runs of ``preset`` (its three seeds), nudged."""
    return nudged(presets.seed_runs(preset))


def plateau_values(results: dict) -> dict:
    """Fig. 2's claims on ``{seed: TrainResult}``, measured as the page measures them."""
    metrics = pages.tidy(results, "seed")
    return milestones.plateau_values(milestones.milestones(metrics), metrics)


def committed_values(shown: dict) -> dict:
    """``{preset: Fig. 2's claims on the committed nudged copies of its runs}`` for the ``{preset: {seed: config}}``
    a page shows; a preset with any nudged copy not committed is left out."""
    values = {}
    for preset, page_configs in shown.items():
        wanted = nudged(page_configs)
        found = pages.committed_runs(wanted)
        if len(found) == len(wanted):
            values[preset] = plateau_values(found)
    return values
