"""The in-context regression chapter's claims measured on a model that has learned nothing: Hoogland et al.'s
config (``ICL_PAPER``) never updated (``engine.train.untrained``), through the stages page's own code. A finding
must fail here (``book.verdicts``).

The sweeps of Carroll et al. and Raventós et al. (12 paper-scale models, an evaluation of about 30 CPU-seconds
each) are measured once and stored (``sweep_values(compute=True)``, then ``sweep_table().commit()``).

The stages run's λ̂ is the same at every checkpoint (the weights never move, and SGLD's seed is fixed), so one estimate at the
initial weights, with the stages curve's SGLD setting (``ICL_LLC_REDUCED``), stands for the whole curve. That row
costs about ten CPU-minutes: ``untrained_llc(compute=True)`` makes it, ``llc_table().commit()`` commits it.
"""
from __future__ import annotations

import pandas as pd

from plateau_lib.engine import cache
from plateau_lib.engine.train import untrained
from plateau_lib.icl import diversity_page, stages_page
from plateau_lib.icl.development import Development, llc_data
from plateau_lib.icl.presets import ICL_LLC_REDUCED, ICL_PAPER
from plateau_lib.llc import SGLDConfig, llc_over_checkpoints

LLC_KIND = "icl_untrained_llc"
SWEEP_KIND = "icl_untrained_sweep"


def llc_table(cfg=ICL_PAPER, llc: SGLDConfig = ICL_LLC_REDUCED) -> cache.StoredTable:
    """The stored λ̂ of ``cfg``'s untrained model at the SGLD setting ``llc``."""
    return cache.StoredTable(LLC_KIND, {"config": cfg, "llc": llc})


def untrained_llc(cfg=ICL_PAPER, llc: SGLDConfig = ICL_LLC_REDUCED, compute: bool = False) -> pd.DataFrame | None:
    """λ̂ at ``cfg``'s initial weights (one row, step 0) with the SGLD setting ``llc``: stored, else computed when
    ``compute`` (and stored locally), else None."""
    stored = llc_table(cfg, llc)
    if (found := stored.load()) is not None or not compute:
        return None if found is None else found[0]["llc"]
    run = untrained(cfg)
    task = cfg.make_task()
    row = llc_over_checkpoints(task.build_model(cfg), task.loss, llc_data(cfg, llc.n_data, llc.seed, "cpu"),
                               [(0, run.final_state)], llc, progress=False, device="cpu")
    stored.save({"llc": row}, {"what": "λ̂ of the untrained model (the baseline of the stages page's λ̂ claims)"})
    return row


def frozen_development(llc_row: pd.DataFrame, cfg=ICL_PAPER) -> Development:
    """The development of a run that learns nothing: its untrained evaluations, and λ̂ ``llc_row`` at every
    checkpoint step of ``cfg``."""
    steps = sorted(s for s in cfg.checkpoint_steps if s > 0)
    llc = pd.DataFrame({"step": steps, "llc_mean": float(llc_row["llc_mean"].iloc[0])})
    return Development(untrained(cfg), llc, pd.DataFrame(), {"untrained": True})


def sweep_table(preset: str = "paper") -> cache.StoredTable:
    """The stored claim values of ``preset``'s sweep never trained."""
    configs, _ = diversity_page.sweep_settings(preset)
    return cache.StoredTable(SWEEP_KIND, {"configs": sorted(cache.cache_key(cfg) for cfg in configs.values()),
                                          "version": 1})


def sweep_values(preset: str = "paper", compute: bool = False) -> dict | None:
    """``{figure: {claim metric: value}}`` of the transient-ridge and task-diversity claims on ``preset``'s sweep
    never trained (the page's own ``transient_values`` and ``diversity_values``; the λ̂ claims are left out):
    stored, else computed when ``compute`` (and stored locally), else None."""
    table = sweep_table(preset)
    stored = table.load()
    if stored is None and not compute:
        return None
    if stored is None:
        configs, llc = diversity_page.sweep_settings(preset)
        sweep = diversity_page.assemble(preset, configs, llc, {k: untrained(c) for k, c in configs.items()}, None)
        values = pd.DataFrame([{"figure": figure, "metric": metric, "value": value}
                               for figure, of in ((diversity_page.TRANSIENT_FIGURE, diversity_page.transient_values),
                                                  (diversity_page.DIVERSITY_FIGURE, diversity_page.diversity_values))
                               for metric, value in of(sweep).items()])
        table.save({"values": values},
                   {"what": f"the {preset} sweep's claims on its untrained models (the claims' baseline)"})
        stored = table.load()
    out = {}
    for row in stored[0]["values"].itertuples():
        out.setdefault(row.figure, {})[row.metric] = row.value
    return out


def values() -> dict:
    """``{figure: {claim metric: value}}``: every stages claim when the untrained λ̂ is stored, else the claims a
    training run decides without λ̂; and the sweeps' claims, where stored."""
    row = untrained_llc()
    if row is None:
        out = {stages_page.FIGURE: stages_page.training_values(untrained(ICL_PAPER).metrics)}
    else:
        dev = frozen_development(row)
        out = {stages_page.FIGURE: stages_page.stage_values(dev, stages_page.detect_stages(dev))}
    return out | (sweep_values() or {})
