"""The stages page's section on the paper's own run, made on a CPU across work days (``icl.long_run``): the note
while it is in progress, λ̂ at the paper's points reached, the reduced SGLD budget's check, its deviations from the
paper and what it shows that the miniature cannot."""
from __future__ import annotations

import numpy as np
import pandas as pd

from plateau_lib.engine.stages import slope_sign_changes
from plateau_lib.icl import long_run
from plateau_lib.icl.development import PAPER_LLC, PAPER_POINTS, PAPER_WEIGHT_NORM
from plateau_lib.icl.presets import ICL_LLC_PAPER, ICL_LLC_REDUCED, ICL_PAPER
from plateau_lib.icl.stages_page import MATCH_FACTOR, boundary_table, min_step, run_steps
from plateau_lib.llc import SGLDConfig


def paper_in_progress_note(cfg, llc: SGLDConfig) -> str:
    """A paragraph on the paper's run being made on a CPU: the step reached, CPU-hours, λ̂ rows; '' without one."""
    state = long_run.progress(cfg)
    if state is None or state["status"] != "in progress":
        return ""
    trained = state.get("training") == "finished"
    rows_done = state["llc_rows"] >= state["llc_checkpoints"]
    headline = (f"**In progress: training finished ({state['steps']:,} steps); λ̂ at {state['llc_rows']} of "
                f"{state['llc_checkpoints']} checkpoints" + (
                    f"; budget checks at {state.get('checks', 0)} of {state.get('check_steps', 0)} checkpoints.**"
                    if rows_done else ".**") if trained
                else f"**In progress: through step {state['step']:,} of {state['steps']:,}.**")
    burn = llc.num_burnin_steps
    return (f"{headline} The paper's own training run "
            f"(seed 1, one-cycle to 3e-3, batch 256, the 190 checkpoints), computed on one CPU core in several stretches "
            f"and committed with its resume state after each (`python -m plateau_lib stages-run`; "
            f"{state['cpu_hours']:.1f} CPU-hours so far). λ̂ is estimated at {state['llc_checkpoints']} of its checkpoints "
            f"at a reduced SGLD budget (the paper's ε, γ, nβ and m = {llc.batch_size:,}; {llc.num_chains} chains × "
            f"{llc.num_draws} draws{f' after {burn} burn-in steps' if burn else ''} from {llc.n_data:,} fixed "
            "sequences instead of 10 × 5,000 from 2²⁰): "
            f"{state['llc_rows']} rows so far. "
            + (f"The budget is checked against chains {long_run.CHECK_FACTOR}× longer at the paper's five points and at "
               f"every row whose chains disagree (standard error over chains above {long_run.RECHECK_SE:g}), and next to "
               "every failed check until passing checks bound it; where the check fails, the longer chains' λ̂ is the "
               "one shown, so those rows are being re-estimated. "
               if rows_done else "")
            + ("The claims the training decides alone are judged below; those that need λ̂ read *in progress*, here and "
               "on the Reproducibility page, until its last row and budget check. " if trained else
               "Nothing of it is judged until the run is finished: its verdicts, here and on the Reproducibility page, "
               "read *in progress*. ")
            + "The paper's boundaries are at the paper's own steps here (dotted), as this run has the paper's schedule.")


def in_progress_points(llc: pd.DataFrame) -> pd.DataFrame:
    """λ̂ at the paper's points that this run has estimated (the nearest selected checkpoint within 5%),
    beside the paper's seed-1 values; points not reached read '—'."""
    rows = []
    for paper, label in PAPER_POINTS.items():
        near = llc[(llc["step"] - paper).abs() <= 0.05 * paper] if not llc.empty else llc
        row = near.iloc[(near["step"] - paper).abs().argmin()] if len(near) else None
        rows.append({"paper point": label, "checkpoint": "—" if row is None else int(row["step"]),
                     "λ̂": "—" if row is None else round(float(row["llc_mean"]), 1),
                     "± se": "—" if row is None or pd.isna(row["llc_se"]) else round(float(row["llc_se"]), 1),
                     "budget": "—" if row is None else row.get("budget", "reduced"),
                     "paper λ̂ (seed 1)": PAPER_LLC[paper]})
    return pd.DataFrame(rows).set_index("paper point")

CHECK_SHOWN = ["reduced", "longer at half its draws", "longer", "relative difference", "draws", "longer draws", "passes"]


def _check_view(table: pd.DataFrame, index) -> pd.DataFrame:
    """A check table as shown: ``CHECK_SHOWN`` with its verdict, a column no row recorded left out, and "–" where
    an older row did not record it (the estimate at half the draws is recorded from the late checks on)."""
    shown = (table.assign(passes=table["relative difference"] < long_run.CHECK_TOLERANCE)
             .reindex(columns=[*index, *CHECK_SHOWN]).set_index(index).round(3).dropna(axis=1, how="all"))
    return shown.astype(object).where(shown.notna(), "–")


def show_budget_check() -> None:
    """The reduced SGLD budget's check against chains ``long_run.CHECK_FACTOR``× longer, and the budgets tried
    before it with the same check."""
    from IPython.display import Markdown, display
    check = long_run.budget_table(ICL_PAPER, ICL_LLC_REDUCED)
    earlier = long_run.earlier_budget_table(ICL_PAPER, ICL_LLC_REDUCED)
    if not earlier.empty:
        display(Markdown("Budgets tried before this one, with the same check (a failure sends the budget back):"),
                _check_view(earlier, ["budget", "step"]))
    if not check.empty:
        display(Markdown(f"The reduced budget against chains {long_run.CHECK_FACTOR}× longer (same seed; the "
                         f"reduced estimate is the same chains after their first {ICL_LLC_REDUCED.num_draws} draws). "
                         f"Budget: {long_run.budget_label(ICL_LLC_REDUCED)}. "
                         f"It is made at the paper's five points, at every row whose chains disagree (standard "
                         f"error over chains above {long_run.RECHECK_SE:g}) and next to every failed check, until "
                         "passing checks bound the stretch where it fails. It passes where the two differ by less than "
                         f"{long_run.CHECK_TOLERANCE:.0%}; where it fails, the reduced budget had not converged there and "
                         "the λ̂ shown at that checkpoint is the longer chains'. The longer chains' estimate at half "
                         "their draws shows whether they were still drifting (recorded from the late checks on):"),
                _check_view(check, ["step"]))


def paper_cpu_note(dev) -> str:
    """What the paper's run made on a CPU is, and each of its deviations from the paper's configuration."""
    llc, hours = dev.meta["llc"], (float(dev.meta["train_wall_s"]) + float(dev.meta["llc_wall_s"])) / 3600
    burn = llc.get("num_burnin_steps", 0)
    longer = int((dev.llc["budget"] != "reduced").sum()) if "budget" in dev.llc else 0
    return (f"**Made on a CPU.** The paper's own training run, exactly (seed 1, one-cycle to 3e-3, batch 256, "
            f"{run_steps(dev):,} steps, evaluated at the paper's {len(ICL_PAPER.checkpoint_steps)} checkpoints), "
            "computed on one CPU core in several stretches and committed after each "
            f"(`python -m plateau_lib stages-run`): {hours:.1f} CPU-hours, "
            f"{float(dev.meta['train_wall_s']) / 3600:.1f} of training and {float(dev.meta['llc_wall_s']) / 3600:.1f} "
            "of λ̂. Its deviations from the paper, all in the λ̂ estimates:\n\n"
            f"- λ̂ at {len(dev.llc)} of the {len(ICL_PAPER.checkpoint_steps)} checkpoints (log-spaced, evenly spaced, and "
            "the nearest to the paper's 1k, 40k, 126k, 320k and the end), so the GP fit of the stages has fewer points;\n"
            f"- {llc['num_chains']} chains × {llc['num_draws']} draws{f' after {burn} burn-in steps' if burn else ''} "
            f"instead of {ICL_LLC_PAPER.num_chains} × {ICL_LLC_PAPER.num_draws:,}, checked against chains "
            "4× longer at the paper's five points, at every row whose chains disagree and next to every failed "
            "check (the table below)"
            + (f"; where that check failed ({longer} checkpoints), the λ̂ shown is the longer chains'" if longer else "")
            + ";\n"
            f"- {llc['n_data']:,} fixed sequences for SGLD instead of {ICL_LLC_PAPER.n_data:,}.\n\n"
            "The paper's ε, γ, nβ and SGLD batch are kept. Its verdicts are given in the paper column below.")


def paper_findings(dev, stages) -> str:
    """What the paper's own run shows that the miniature cannot, read from its λ̂ rows, stages and structure: where
    λ̂ peaks and how long it stays near the peak, its fall and what follows, the stages and boundaries found against
    the paper's (and the critical points the rule steps over between checkpoints), and the weight norm's growth."""
    llc = dev.llc.dropna(subset=["llc_mean"]).sort_values("step").reset_index(drop=True)
    at = llc.set_index("step")["llc_mean"]
    peak_step = int(at.idxmax())
    near = llc.loc[llc["llc_mean"] >= 0.98 * at.max(), "step"].astype(int)
    after = at[at.index >= peak_step]
    low_step, end_step = int(after.idxmin()), int(at.index[-1])
    fall = (f"After the peak its lowest value is {at[low_step]:.1f} at step {low_step:,}, {at[low_step] / at.max():.0%} of "
            f"the peak (the paper's LR3–LR4: 112.8 at 320k, {112.8 / 169.3:.0%} of its peak)" + (f", and rises again to {at[end_step]:.1f} at the end, where the paper's stays roughly flat "
                        f"(116.3 at 500k; seeds 0–4: 116–141)." if at[end_step] > 1.05 * at[low_step] else
                        f", and ends at {at[end_step]:.1f} (the paper: 116.3)."))
    table = boundary_table(stages.boundaries, run_steps(dev), llc)
    matched = table.loc[table["match"] == "yes", "paper step"].tolist()
    first = min_step(run_steps(dev))
    stepped_over = [s for s in slope_sign_changes(stages.steps, stages.slope) if s >= first and s not in stages.boundaries]
    norms = dev.structure.set_index("step")["weight_norm"] if "weight_norm" in dev.structure else pd.Series(dtype=float)
    grown = [(p, norms.index[np.abs(np.log1p(norms.index) - np.log1p(p)).argmin()]) for p in PAPER_WEIGHT_NORM if p]
    return (f"**What this run shows that the miniature cannot.** λ̂ rises through LR1 and LR2 to its peak, "
            f"{at.max():.1f} at step {peak_step:,} (the paper: 169.3 at 40k)" + (
                f", and stays within 2% of it from step {near.min():,} to {near.max():,}" if near.min() < near.max()
                else "") + f". {fall} The GP rule finds {len(stages.boundaries) + 1} stages, with "
            f"boundaries at steps {', '.join(f'{b:,}' for b in stages.boundaries) or 'none'}; {len(matched)} of the "
            f"paper's four ({', '.join(f'{m // 1000}k' for m in matched) or 'none'}) are matched, within a factor "
            f"{MATCH_FACTOR:g} in step and with λ̂'s trend on either side as in the paper." + (
                f" The GP's slope also changes sign next to step(s) {', '.join(f'{s:,}' for s in stepped_over)}: "
                "critical points of λ̂ that the rule steps over: with λ̂ at "
                f"{len(llc)} of the {len(dev.train.config.get('checkpoint_steps', ())) or len(llc)} checkpoints, no "
                "checkpoint there has |slope| below its tolerance." if stepped_over else "") + (
                " The weight norm grows as the paper's: " + ", ".join(
                    f"{norms[s]:.0f} at step {int(s):,} (paper {PAPER_WEIGHT_NORM[p]:.0f})" for p, s in grown) + "."
                if grown and not norms.empty else ""))
