"""The in-context regression chapter's steps after training, for the paper queue (``plateau_lib.paper``): λ̂ and
structure at every checkpoint of the stages run, and the transient-ridge sweep's SGLD calibration and λ̂ against M."""
from __future__ import annotations

from functools import partial
from pathlib import Path

from plateau_lib.engine.analysis import Analysis
from plateau_lib.icl import development, diversity, presets


def _stages(cfg, llc, device: str, stack: int, deadline: float | None) -> list[Path]:
    development.run(cfg.replace(device=device), llc, progress=False, stack=stack, deadline=deadline)
    return development.commit(cfg, llc)


def _diversity(configs, llc, device: str, stack: int, deadline: float | None) -> list[Path]:
    configs = {k: c.replace(device=device) for k, c in configs.items()}
    diversity.llc_calibration(diversity.calibration_runs(configs), llc, presets.DIVERSITY_CALIBRATION, progress=False)
    diversity.llc_vs_M(configs, llc, progress=False, deadline=deadline)
    return diversity.commit(configs, llc, presets.DIVERSITY_CALIBRATION)


def analyses(preset: str = "paper") -> list[Analysis]:
    """The chapter's analyses for ``preset`` (the cpu queue's are those of the long CPU runs, as in ``page_runs``)."""
    long = "paper" if preset == "paper" else "cpu_long"
    cfg, llc = presets.icl_stages(long)
    sweep, sweep_llc = presets.diversity(long)
    grid = presets.DIVERSITY_CALIBRATION
    return [
        Analysis("icl_stages", "λ̂ and structure at every checkpoint", (cfg,),
                 (f"{development.KIND}-{development.key(cfg, llc)}",), partial(_stages, cfg, llc)),
        Analysis("transient_ridge", "SGLD calibration and λ̂ against M", tuple(sweep.values()),
                 (diversity.llc_table(sweep, sweep_llc).name, diversity.calibration_table(sweep, sweep_llc, grid).name),
                 partial(_diversity, sweep, sweep_llc))]
