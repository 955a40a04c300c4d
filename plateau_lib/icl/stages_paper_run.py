"""The numbers of the stages page's section on the paper's own run, made on a CPU across work days
(``icl.long_run``): what it shows that the miniature cannot, its deviations from the paper and the reduced SGLD
budget's check. The page's Markdown says them; these functions give the numbers as the page glues them."""
from __future__ import annotations

import numpy as np
import pandas as pd

from plateau_lib.book.pages import MISSING
from plateau_lib.book.verdicts import listed, steps_listed
from plateau_lib.engine.stages import slope_sign_changes
from plateau_lib.icl import long_run
from plateau_lib.icl.development import PAPER_LLC, PAPER_WEIGHT_NORM
from plateau_lib.icl.presets import ICL_LLC_PAPER, ICL_LLC_REDUCED, ICL_PAPER
from plateau_lib.icl.stages_page import MATCH_FACTOR, boundary_table, made_on_cpu, min_step, run_steps


FINDINGS = ("peak", "peak_step", "near_from", "near_to", "low", "low_step", "low_share", "end", "stages", "boundaries",
            "matched", "matched_steps", "stepped_over", "weight_norm")


def findings(dev, stages) -> dict[str, str]:
    """What the paper's run ``dev`` shows that the miniature cannot, as the page glues it (``paper_run_{key}``
    for each key of ``FINDINGS``; ``MISSING`` without a run): λ̂'s peak and its step, the steps within 2% of the
    peak, its lowest value after the peak (and that value's share of the peak), its value at the end, the stages
    and boundaries the GP rule finds, how many of the paper's four it matches (``boundary_table``), the critical
    points of the GP's slope that the rule steps over, and the weight norm at the paper's steps."""
    if dev is None or stages is None:
        return {f"paper_run_{key}": MISSING for key in FINDINGS}
    llc = dev.llc.dropna(subset=["llc_mean"]).sort_values("step").reset_index(drop=True)
    at = llc.set_index("step")["llc_mean"]
    peak_step = int(at.idxmax())
    near = llc.loc[llc["llc_mean"] >= 0.98 * at.max(), "step"].astype(int)
    after = at[at.index >= peak_step]
    low_step = int(after.idxmin())
    table = boundary_table(stages.boundaries, run_steps(dev), llc)
    matched = table.loc[table["match"] == "yes", "paper step"].tolist()
    first = min_step(run_steps(dev))
    stepped_over = [s for s in slope_sign_changes(stages.steps, stages.slope) if s >= first and s not in stages.boundaries]
    norms = dev.structure.set_index("step")["weight_norm"] if "weight_norm" in dev.structure else pd.Series(dtype=float)
    grown = [(p, norms.index[np.abs(np.log1p(norms.index) - np.log1p(p)).argmin()])
             for p in PAPER_WEIGHT_NORM if p and not norms.empty]
    values = {"peak": f"{at.max():.1f}", "peak_step": f"{peak_step:,}", "near_from": f"{near.min():,}",
              "near_to": f"{near.max():,}", "low": f"{at[low_step]:.1f}", "low_step": f"{low_step:,}",
              "low_share": f"{at[low_step] / at.max():.0%}", "end": f"{at.iloc[-1]:.1f}",
              "stages": str(len(stages.boundaries) + 1), "boundaries": listed(stages.boundaries, "{:,.0f}", "none"),
              "matched": str(len(matched)), "matched_steps": listed([f"{m // 1000}k" for m in matched], empty="none"),
              "stepped_over": steps_listed(stepped_over, "none"),
              "weight_norm": "; ".join(f"{norms[s]:.0f} at step {int(s):,} (paper {PAPER_WEIGHT_NORM[p]:.0f})"
                                       for p, s in grown) or MISSING}
    return {f"paper_run_{key}": values[key] for key in FINDINGS}


def paper_reference() -> dict[str, str]:
    """The paper's seed-1 λ̂ at its peak (40k), in LR3–LR4 (320k) and at the end, the fall's share of the peak,
    and the factor in step within which a boundary found matches one of the paper's."""
    peak, low, end = PAPER_LLC[40_000], PAPER_LLC[320_000], PAPER_LLC[500_000]
    return {"paper_llc_peak": f"{peak:.1f}", "paper_llc_320k": f"{low:.1f}", "paper_llc_end": f"{end:.1f}",
            "paper_llc_share": f"{low / peak:.0%}", "match_factor": f"{MATCH_FACTOR:g}"}


def cpu_run(dev) -> dict[str, str]:
    """How the committed paper run ``dev`` was made on a CPU, as the page glues it (``cpu_run_{key}``): its
    CPU-hours (training, λ̂), steps and checkpoints, and each deviation of its λ̂ from the paper's SGLD settings
    (checkpoints estimated, chains × draws and burn-in, the rows where chains 4× longer replaced the reduced
    budget, the fixed sequences); ``MISSING`` without a run made on a CPU."""
    keys = ("hours", "train_hours", "llc_hours", "steps", "checkpoints", "llc_rows", "chains", "draws", "burnin",
            "longer_rows", "n_data")
    if not made_on_cpu(dev):
        return {f"cpu_run_{key}": MISSING for key in keys}
    llc, train_s, llc_s = dev.meta["llc"], float(dev.meta["train_wall_s"]), float(dev.meta["llc_wall_s"])
    longer = int((dev.llc["budget"] != "reduced").sum()) if "budget" in dev.llc else 0
    values = {"hours": f"{(train_s + llc_s) / 3600:.1f}", "train_hours": f"{train_s / 3600:.1f}",
              "llc_hours": f"{llc_s / 3600:.1f}", "steps": f"{run_steps(dev):,}",
              "checkpoints": f"{len(ICL_PAPER.checkpoint_steps)}", "llc_rows": f"{len(dev.llc)}",
              "chains": f"{llc['num_chains']}", "draws": f"{llc['num_draws']:,}",
              "burnin": f"{llc.get('num_burnin_steps', 0):,}", "longer_rows": f"{longer}",
              "n_data": f"{llc['n_data']:,}"}
    return {f"cpu_run_{key}": values[key] for key in keys}


def paper_budget() -> dict[str, str]:
    """The paper's SGLD budget and the reduced budget's check, as the page glues them."""
    return {"paper_sgld_chains": f"{ICL_LLC_PAPER.num_chains}", "paper_sgld_draws": f"{ICL_LLC_PAPER.num_draws:,}",
            "paper_sgld_n_data": f"{ICL_LLC_PAPER.n_data:,}", "check_factor": f"{long_run.CHECK_FACTOR}",
            "check_reduced_draws": f"{ICL_LLC_REDUCED.num_draws:,}",
            "check_budget": long_run.budget_label(ICL_LLC_REDUCED), "check_recheck_se": f"{long_run.RECHECK_SE:g}",
            "check_tolerance": f"{long_run.CHECK_TOLERANCE:.0%}"}


CHECK_SHOWN = ["reduced", "longer at half its draws", "longer", "relative difference", "draws", "longer draws", "passes"]


def _check_view(table: pd.DataFrame, index) -> pd.DataFrame:
    """A check table as shown: ``CHECK_SHOWN`` with its verdict, a column no row recorded left out, and "–" where
    an older row did not record it (the estimate at half the draws is recorded from the late checks on)."""
    if table.empty:
        return table
    shown = (table.assign(passes=np.where(table["relative difference"] < long_run.CHECK_TOLERANCE, "yes", "no"))
             .reindex(columns=[*index, *CHECK_SHOWN]).set_index(index).round(3).dropna(axis=1, how="all"))
    return shown.astype(object).where(shown.notna(), MISSING)


def budget_check() -> pd.DataFrame:
    """The reduced SGLD budget of the committed paper run against chains ``long_run.CHECK_FACTOR``× longer, one
    row per checked checkpoint."""
    return _check_view(long_run.budget_table(ICL_PAPER, ICL_LLC_REDUCED), ["step"])


def earlier_budgets() -> pd.DataFrame:
    """The budgets tried before the reduced one, with the same check, one row per budget and checkpoint."""
    return _check_view(long_run.earlier_budget_table(ICL_PAPER, ICL_LLC_REDUCED), ["budget", "step"])
