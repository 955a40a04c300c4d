"""The in-context linear regression pages' miniatures re-run as another machine might run them: the same configs
with every initial weight one float step up (``TrainConfig.init_nudge``), as ``plateau.rerun`` does for the
loss-plateau pages. A verdict that such a re-run turns is *fragile* (``book.summaries``); the page shows both.

The nudged runs, with their λ̂, are made and committed by ``python -m plateau_lib rerun --preset cpu --commit``; a
page reads them stored, and trains nothing."""
from __future__ import annotations

from plateau_lib.engine.cache import current
from plateau_lib.engine.runs import nudged, nudged_config
from plateau_lib.engine.sweep import sweep
from plateau_lib.icl import development, diversity as div, diversity_page as dp, stages_page
from plateau_lib.icl.presets import icl_stages

SWEEP_MEASURES = {dp.TRANSIENT_FIGURE: dp.transient_values, dp.DIVERSITY_FIGURE: dp.diversity_values}
PRESETS = {"cpu": (stages_page.FIGURE, *SWEEP_MEASURES), "paper": ()}  # the paper runs are hours or a GPU's


def stages_values(cfg, llc) -> dict | None:
    """The stages claims on the stored nudged copy of the run ``cfg`` with its λ̂ at ``llc`` (the page's live run),
    measured as the page measures them; None where it is not stored."""
    dev = development.load(nudged_config(cfg), llc)
    return None if dev is None else stages_page.stage_values(dev, stages_page.detect_stages(dev))


def sweep_values(figure: str, configs: dict, llc) -> dict | None:
    """``figure``'s claims (the transient ridge's or task diversity's) on the stored nudged copies of the sweep
    ``configs`` and (for the transient ridge) their λ̂ table at ``llc``, judged seed by seed as the page judges
    them; None where any is not stored."""
    wanted, store = nudged(configs), current()
    results = {label: store.result(cfg) for label, cfg in wanted.items()}
    found = div.load_llc(wanted, llc)  # task diversity's claims need no λ̂
    if any(r is None for r in results.values()) or (found is None and figure == dp.TRANSIENT_FIGURE):
        return None
    return dp.seed_by_seed(SWEEP_MEASURES[figure], dp.assemble("rerun", wanted, llc, results, found))


def stages_rerun(preset: str, cfg, llc) -> dict:
    """``{preset: claims}`` on the stored nudged copy of the stages page's live run (``stages_values``), for
    ``book.pages.verdicts``' ``rerun``; empty where it is not stored (a page run with other parameters than the
    committed re-run's)."""
    values = stages_values(cfg, llc)
    return {} if values is None else {preset: values}


def sweep_rerun(figure: str, preset: str, configs: dict, llc) -> dict:
    """``{preset: claims}`` on the stored nudged copies of a sweep page's live sweep (``sweep_values``); empty
    where they are not all stored."""
    values = sweep_values(figure, configs, llc)
    return {} if values is None else {preset: values}


def _check(figure: str, preset: str) -> None:
    if figure not in PRESETS.get(preset, ()):
        raise ValueError(f"figure must be one of {list(PRESETS.get(preset, ()))} at preset {preset!r}, got {figure!r}")


def run(figure: str, preset: str) -> dict:
    """Train ``figure``'s nudged runs at ``preset`` and estimate their λ̂ (through the store); their claims."""
    _check(figure, preset)
    if figure == stages_page.FIGURE:
        cfg, llc = icl_stages(preset)
        stages_page.develop(nudged_config(cfg), llc, progress=False)
        return stages_values(cfg, llc)
    configs, llc = dp.sweep_settings(preset)
    sweep(nudged(configs), progress=False)
    div.llc_vs_M(nudged(configs), llc, progress=False)
    return sweep_values(figure, configs, llc)


def commit(figure: str, preset: str) -> list:
    """Commit ``figure``'s nudged runs at ``preset`` and their λ̂ table; returns the folders."""
    _check(figure, preset)
    store = current()
    if figure == stages_page.FIGURE:
        cfg, llc = icl_stages(preset)
        cfg = nudged_config(cfg)
        return [store.commit(cfg), development.stored(cfg, llc).commit()]
    configs, llc = dp.sweep_settings(preset)
    wanted = nudged(configs)
    return [store.commit(cfg) for cfg in wanted.values()] + [div.llc_table(wanted, llc).commit()]
