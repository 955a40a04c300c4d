"""The in-context regression chapter's steps after training, for the paper queue (``plateau_lib.paper_queue``) and the
``stages`` and ``diversity`` commands: λ̂ and structure at every checkpoint of the stages run, and the
transient-ridge sweep's SGLD calibration and λ̂ against M."""
from __future__ import annotations

from functools import partial

from plateau_lib.engine.analysis import Analysis
from plateau_lib.icl import development, diversity, presets
from plateau_lib.llc import SGLDConfig


def _stages(cfg, llc, device: str, stack: int, deadline: float | None) -> None:
    development.run(cfg.replace(device=device), llc, progress=False, stack=stack, deadline=deadline)


def _diversity(configs, llc, grid, device: str, stack: int, deadline: float | None) -> None:
    configs = {k: c.replace(device=device) for k, c in configs.items()}
    diversity.llc_calibration(diversity.calibration_runs(configs), llc, grid, progress=False)
    diversity.llc_vs_M(configs, llc, progress=False, deadline=deadline)


def stages(cfg, llc: SGLDConfig) -> Analysis:
    """λ̂ and structure at every checkpoint of the stages run ``cfg`` (``development.run``)."""
    return Analysis("icl_stages", "λ̂ and structure at every checkpoint", (cfg,), (development.stored(cfg, llc),),
                    partial(_stages, cfg, llc))


def transient_ridge(configs: dict, llc: SGLDConfig, grid: dict = presets.DIVERSITY_CALIBRATION) -> Analysis:
    """The sweep ``configs``' SGLD calibration over ``grid``, then λ̂ of every run at the end of training."""
    return Analysis("transient_ridge", "SGLD calibration and λ̂ against M", tuple(configs.values()),
                    (diversity.llc_table(configs, llc), diversity.calibration_table(configs, llc, grid)),
                    partial(_diversity, configs, llc, grid))


def analyses(preset: str = "paper") -> list[Analysis]:
    """The chapter's analyses for ``preset`` (the cpu queue's are those of the long CPU runs, as in ``page_runs``)."""
    long = "paper" if preset == "paper" else "cpu_long"
    return [stages(*presets.icl_stages(long)), transient_ridge(*presets.diversity(long))]
