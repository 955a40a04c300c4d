"""The loss-plateau chapter's steps after training, for the paper queue (``plateau_lib.paper``): λ̂ across the MWS
plateau (its SGLD calibration first) and the probe with the collapse locations at every checkpoint."""
from __future__ import annotations

from functools import partial
from pathlib import Path

from plateau_lib.engine.analysis import Analysis
from plateau_lib.llc.calibration import chosen_setting
from plateau_lib.plateau import llc_across, presets, probe


def _plateau(runs, sgld, device: str, stack: int, deadline: float | None) -> list[Path]:
    first = runs[min(runs)]
    calibration, _ = llc_across.calibrate(first, presets.PLATEAU_LLC_CALIBRATION, sgld, device=device)
    written = [llc_across.calibration_table(first, presets.PLATEAU_LLC_CALIBRATION, sgld).commit()]
    chosen, used = chosen_setting(calibration), {k: float(sgld[k]) for k in ("epsilon", "nbeta", "gamma")}
    if chosen != used:  # the page's λ̂ must use the calibrated setting: a person decides
        print(f"plateau_llc: the calibration chose {chosen}, the preset uses {used}; update "
              "plateau.presets.PLATEAU_LLC_SGLD, then run the queue again (calibration committed, λ̂ not run)", flush=True)
        return written
    llc_across.plateau_llc(runs, sgld, device=device, stack=stack, deadline=deadline)
    return written + [llc_across.llc_table(runs, sgld).commit()]


def _probe(configs, settings, device: str, stack: int, deadline: float | None) -> list[Path]:
    probe.measure_runs({k: c.replace(device=device) for k, c in configs.items()}, settings, progress=False,
                       deadline=deadline)
    return probe.commit(configs, settings)


def analyses(preset: str = "paper") -> list[Analysis]:
    """The chapter's analyses for ``preset`` (the cpu queue's λ̂ is the long CPU run's, as in ``page_runs``)."""
    runs, sgld = presets.plateau_llc("paper" if preset == "paper" else "cpu_long")
    calibrated = llc_across.calibration_table(runs[min(runs)], presets.PLATEAU_LLC_CALIBRATION, sgld)
    probed, settings = presets.probe_runs(preset), presets.probe_settings(preset)
    return [
        Analysis("plateau_llc", "SGLD calibration and λ̂ at every checkpoint", tuple(runs.values()),
                 (calibrated.name, llc_across.llc_table(runs, sgld).name),
                 partial(_plateau, runs, sgld)),
        Analysis("mws_probe_and_locations", "probe and collapse at every checkpoint", tuple(probed.values()),
                 (probe.probe_table(probed, settings).name,), partial(_probe, probed, settings))]
