"""Stage detection on metric curves: where the partial solution appears, the plateau, the jump."""
from __future__ import annotations

import numpy as np
import pandas as pd


def first_crossing(steps, values, level: float, above: bool = True):
    """First step at which ``values`` reaches ``level`` (>= if above, <= otherwise); None if never."""
    values = np.asarray(values, dtype=float)
    hit = values >= level if above else values <= level
    idx = np.flatnonzero(hit)
    return None if idx.size == 0 else int(np.asarray(steps)[idx[0]])


def plateau_summary(metrics: pd.DataFrame, first_level: float = 0.9, jump_level: float = 0.5,
                    solved_level: float = 0.95) -> dict:
    """Milestones of one run from its metrics table (columns step, acc_first, acc_rest, acc, cosine, rho, apm).

    - ``partial_step``: y_1 (the partial solution) reaches ``first_level`` accuracy;
    - ``jump_step``: the other outputs cross ``jump_level`` accuracy (the abrupt drop);
    - ``plateau_span``: jump_step - partial_step, the steps spent with only the partial solution;
    - ``solved_step``: overall accuracy reaches ``solved_level``;
    - peaks of cosine and ρ up to the jump, and APM at the last evaluation before the jump.
    """
    m = metrics.sort_values("step")
    steps = m["step"].to_numpy()
    partial = first_crossing(steps, m["acc_first"], first_level)
    jump = first_crossing(steps, m["acc_rest"], jump_level)
    solved = first_crossing(steps, m["acc"], solved_level)
    before = m[m["step"] < jump] if jump is not None else m
    if before.empty:  # solved at the first evaluation: no plateau to speak of
        before = m.iloc[:1]
    return {
        "partial_step": partial,
        "jump_step": jump,
        "plateau_span": None if partial is None or jump is None else jump - partial,
        "solved_step": solved,
        "peak_cosine": float(before["cosine"].max()),
        "peak_rho": float(before["rho"].max()),
        "apm_start": float(m["apm"].iloc[0]),
        "apm_before_jump": float(before["apm"].iloc[-1]),
        "final_acc": float(m["acc"].iloc[-1]),
    }


def summarize_runs(metrics: pd.DataFrame, by=("seed",), **kwargs) -> pd.DataFrame:
    """``plateau_summary`` for each group (e.g. each seed, or each (c, seed)) as a tidy table."""
    by = list(by)
    rows = [{**dict(zip(by, key if isinstance(key, tuple) else (key,))), **plateau_summary(g, **kwargs)}
            for key, g in metrics.groupby(by)]
    return pd.DataFrame(rows)
