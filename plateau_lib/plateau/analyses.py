"""The loss-plateau chapter's steps after training, for the paper queue (``plateau_lib.paper_queue``) and the
``plateau-llc`` and ``probe`` commands: λ̂ across the MWS plateau (its SGLD calibration first) and the probe with
the collapse locations at every checkpoint."""
from __future__ import annotations

from functools import partial

from plateau_lib.engine.analysis import Analysis
from plateau_lib.llc.calibration import chosen_setting
from plateau_lib.llc.config import SGLDConfig
from plateau_lib.plateau import llc_across, presets, probe


def _plateau(runs, sgld, device: str, stack: int, deadline: float | None) -> None:
    calibration, _ = llc_across.calibrate(runs[min(runs)], presets.PLATEAU_LLC_CALIBRATION, sgld, device=device)
    chosen, used = chosen_setting(calibration), {k: float(getattr(sgld, k)) for k in ("epsilon", "nbeta", "gamma")}
    if chosen != used:  # the page's λ̂ must use the calibrated setting: a person decides
        print(f"plateau_llc: the calibration chose {chosen}, the preset uses {used}; update "
              "plateau.presets.PLATEAU_LLC_SGLD, then run the queue again (calibration made, λ̂ not run)", flush=True)
        return
    llc_across.plateau_llc(runs, sgld, device=device, stack=stack, deadline=deadline)


def _probe(configs, settings, device: str, stack: int, deadline: float | None) -> None:
    probe.measure_runs({k: c.replace(device=device) for k, c in configs.items()}, settings, progress=False,
                       deadline=deadline)


def plateau_llc(runs: dict, sgld: SGLDConfig) -> Analysis:
    """The SGLD calibration on the first seed's run, then λ̂ at every checkpoint of every seed's."""
    calibrated = llc_across.calibration_table(runs[min(runs)], presets.PLATEAU_LLC_CALIBRATION, sgld)
    return Analysis("plateau_llc", "SGLD calibration and λ̂ at every checkpoint", tuple(runs.values()),
                    (calibrated, llc_across.llc_table(runs, sgld)), partial(_plateau, runs, sgld))


def probe_and_locations(configs: dict, settings: dict) -> Analysis:
    """The probe and the collapse locations at every checkpoint of ``configs``."""
    return Analysis("mws_probe_and_locations", "probe and collapse at every checkpoint", tuple(configs.values()),
                    (probe.probe_table(configs, settings),), partial(_probe, configs, settings))


def analyses(preset: str = "paper") -> list[Analysis]:
    """The chapter's analyses for ``preset`` (the cpu queue's λ̂ is the long CPU run's, as in ``page_runs``)."""
    return [plateau_llc(*presets.plateau_llc("paper" if preset == "paper" else "cpu_long")),
            probe_and_locations(presets.probe_runs(preset), presets.probe_settings(preset))]
