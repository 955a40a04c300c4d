"""λ̂ across the MWS plateau (plateau_lib.plateau.llc_across): presets, bad input, the phase and boundary tables on
hand-built curves, the calibration rule, and resuming a table built row by row."""
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from plateau_lib.engine import cache
from plateau_lib.llc.calibration import chosen_setting, mark_choice
from plateau_lib.llc import SGLDConfig
from plateau_lib.plateau import llc_across, presets


@pytest.mark.parametrize("preset", ["cpu", "cpu_long", "paper"])
def test_presets_are_valid(preset):
    runs, sgld = presets.plateau_llc(preset)
    assert list(runs) == ([0] if preset == "cpu" else [0, 1, 2])
    for seed, cfg in runs.items():
        assert cfg.seed == seed and cfg.steps == presets.PLATEAU_LLC_STEPS[preset]
        steps = cfg.checkpoint_steps
        assert list(steps) == sorted(set(steps)) and steps[0] == 0 and steps[-1] == cfg.steps
    base = presets.MWS_PAPER if preset == "paper" else presets.MWS_CPU
    assert runs[0].replace(steps=base.steps, checkpoint_steps=()) == base  # only the length and checkpoints differ
    assert isinstance(sgld, SGLDConfig) and sgld.n_data is not None and sgld.batch_size is not None


def test_paper_preset_is_the_papers_config_with_the_calibrated_sgld():
    runs, sgld = presets.plateau_llc("paper")
    cfg = runs[0]
    assert (cfg.d_model, cfg.lr, cfg.batch_size, cfg.steps) == (256, 1e-4, 256, 400)
    assert sgld.batch_size == 1024
    long = presets.PLATEAU_LLC_SGLD["cpu_long"]
    assert (sgld.epsilon, sgld.nbeta, sgld.gamma) == (long.epsilon, long.nbeta, long.gamma)


@pytest.mark.parametrize("checkpoints", [[0, 100, 700], [-5, 10], [], [10.5], [0, 100, 200, 300]])
def test_checkpoints_outside_the_run_are_refused(checkpoints):
    with pytest.raises(ValueError, match="checkpoints"):
        presets.plateau_llc_runs("cpu", checkpoints=checkpoints)


def test_bad_preset_and_unknown_sgld_setting():
    with pytest.raises(ValueError, match="preset"):
        presets.plateau_llc("gpu")
    with pytest.raises(ValueError, match="unknown SGLD setting"):
        presets.plateau_llc("cpu", num_chain=3)
    with pytest.raises(ValueError, match="num_draws"):  # the cpu preset burns in 10 steps: refused before training
        presets.plateau_llc("cpu", num_draws=10)


def test_a_run_without_checkpoints_is_refused_before_training():
    cfg = presets.MWS_CPU.replace(steps=10)
    with pytest.raises(ValueError, match="parameter 'cfg' has no checkpoint_steps"):
        cache.current().trained_checkpoints(cfg)


def _curve(seed, values, steps):
    return pd.DataFrame({"seed": seed, "step": steps, "llc_mean": values, "llc_se": 0.5})


def test_phase_table_on_a_hand_built_curve():
    steps = [0, 50, 100, 150, 200, 250, 300]
    llc = pd.concat([_curve(0, [1, 5, 9, 10, 11, 30, 31], steps), _curve(1, [2, 2, 2, 2, 2, 2, 2], steps)])
    milestones = pd.DataFrame({"seed": [0, 1], "partial_step": [100, np.nan], "jump_step": [240, np.nan]})
    t = llc_across.phase_table(llc, milestones).set_index(["seed", "phase"])
    # seed 0: before = nearest 50 (half the partial step), during = nearest 170 -> 150, after = last (300)
    assert t.loc[(0, "before"), "step"] == 50 and t.loc[(0, "before"), "llc_mean"] == 5
    assert t.loc[(0, "during"), "step"] == 150 and t.loc[(0, "during"), "llc_mean"] == 10
    assert t.loc[(0, "after"), "step"] == 300 and t.loc[(0, "after"), "llc_mean"] == 31
    assert t.loc[(0, "after"), "llc_se"] == 0.5
    # seed 1 never reached a partial solution: before and during are missing, after is still the last checkpoint
    assert np.isnan(t.loc[(1, "before"), "llc_mean"]) and np.isnan(t.loc[(1, "during"), "llc_mean"])
    assert t.loc[(1, "after"), "llc_mean"] == 2
    wide = llc_across.phase_wide(llc_across.phase_table(llc, milestones))
    assert wide.loc[0, "during"] == "10.0 ± 0.5 (step 150)" and wide.loc[1, "before"] == "—"


def test_boundary_table_pairs_the_nearest_boundary_with_the_jump():
    milestones = pd.DataFrame({"seed": [0, 1], "partial_step": [80, 150], "jump_step": [220, 400]})
    steps = np.array([0, 100, 200, 300, 450, 600])
    found = {0: SimpleNamespace(boundaries=[60, 250, 500], steps=steps, values=np.array([1, 2, 3, 30, 31, 32.])),
             1: SimpleNamespace(boundaries=[], steps=steps, values=np.array([1, 2, 3, 4, 50, 51.]))}
    t = llc_across.boundary_table(found, milestones).set_index("seed")
    assert t.loc[0, "nearest to the jump"] == 250 and t.loc[0, "boundary − jump (steps)"] == 30
    assert t.loc[0, "GP boundaries on λ̂"] == "60, 250, 500"
    assert t.loc[1, "GP boundaries on λ̂"] == "none" and pd.isna(t.loc[1, "nearest to the jump"])
    # λ̂ rises fastest over 200 -> 300 (seed 0: holds the jump at 220) and 300 -> 450 (seed 1: holds 400)
    assert t.loc[0, "steepest λ̂ rise"] == "200 → 300" and t.loc[0, "jump inside it"]
    assert t.loc[1, "steepest λ̂ rise"] == "300 → 450" and t.loc[1, "jump inside it"]
    milestones.loc[1, "jump_step"] = 460
    assert not llc_across.boundary_table(found, milestones).set_index("seed").loc[1, "jump inside it"]


def _cell(step, eps, nbeta, llc, diverged=0, converged=True):
    return {"step": step, "epsilon": eps, "nbeta": nbeta, "gamma": 100.0, "llc_final": llc, "llc_se": 1.0,
            "num_diverged": diverged, "negative": llc < 0, "converged": converged}


def test_calibration_rule_on_a_hand_built_sweep():
    rows = []
    for step in (150, 600):
        # nβ = 100: flat up to ε = 1e-3 (10 -> 11 is +10 %), then ε = 3e-3 diverges
        rows += [_cell(step, 3e-4, 100.0, 10.0), _cell(step, 1e-3, 100.0, 11.0), _cell(step, 3e-3, 100.0, 40.0, 1)]
        # nβ = 25: flat everywhere
        rows += [_cell(step, 3e-4, 25.0, 3.0), _cell(step, 1e-3, 25.0, 3.1), _cell(step, 3e-3, 25.0, 3.2)]
    t = mark_choice(pd.DataFrame(rows), over="step")
    assert chosen_setting(t) == {"epsilon": 1e-3, "nbeta": 100.0, "gamma": 100.0}
    assert t["chosen"].sum() == 2  # the chosen setting at both steps
    # not flat at one step (11 -> 20 is +82 %) disqualifies ε = 1e-3 at nβ = 100; nβ = 100, ε = 3e-4 remains
    rows[1] = _cell(150, 1e-3, 100.0, 20.0)
    assert chosen_setting(mark_choice(pd.DataFrame(rows), over="step")) == {
        "epsilon": 3e-4, "nbeta": 100.0, "gamma": 100.0}
    # nothing healthy: nothing chosen
    bad = pd.DataFrame([_cell(s, e, 25.0, 1.0, converged=False) for s in (1, 2) for e in (1e-4, 1e-3)])
    assert chosen_setting(mark_choice(bad, over="step")) is None


def test_the_committed_calibration_is_marked_by_the_books_one_rule():
    """The chapter's committed sweep carries the marks of ``mark_choice`` at the book's FLAT_TOL (10 %), as the LLC
    page states the rule: no chapter keeps a tolerance of its own."""
    from pathlib import Path
    (folder,) = Path(__file__).resolve().parents[1].glob("results/plateau_llc_calibration-*")
    stored = pd.read_csv(folder / "calibration.csv")
    again = mark_choice(stored.drop(columns=["healthy", "flat", "chosen"]), over="step")
    key = ["step", "nbeta", "gamma", "epsilon"]
    ordered = stored.sort_values(key).reset_index(drop=True)
    assert ordered["flat"].tolist() == again["flat"].tolist() and ordered["chosen"].tolist() == again["chosen"].tolist()
    assert chosen_setting(again) == {"epsilon": 3e-3, "nbeta": 100.0, "gamma": 100.0}


def test_a_stored_table_builds_each_row_once_and_resumes(tmp_path, use_store):
    use_store(local=tmp_path)
    calls, interrupted = [], []

    def rows(steps):
        calls.extend(steps)
        if 30 in steps and not interrupted:
            interrupted.append(30)
            raise KeyboardInterrupt  # the first run is interrupted at step 30
        return pd.DataFrame({"step": steps, "llc_mean": [s / 10 for s in steps]})

    table = cache.StoredTable("test_kind", {"k": 1})
    with pytest.raises(KeyboardInterrupt):
        table.build([0, 10, 20, 30, 40], rows, progress=False)
    assert calls == [0, 10, 20, 30]
    built = table.build([0, 10, 20, 30, 40], rows, progress=False)
    assert calls == [0, 10, 20, 30, 30, 40]  # rows 0-20 were kept, not recomputed
    assert built["step"].tolist() == [0, 10, 20, 30, 40] and built["llc_mean"].tolist() == [0, 1, 2, 3, 4]
    # groups of two steps per call: an interruption loses at most the group being computed
    calls.clear()
    built = cache.StoredTable("test_kind", {"k": 2}).build([0, 10, 20, 30, 40], rows, group=2, progress=False)
    assert calls == [0, 10, 20, 30, 40] and built["step"].tolist() == [0, 10, 20, 30, 40]
    # rows keyed by two columns: the kept (M, seed) pairs are skipped, whatever their stored dtype
    pairs = cache.StoredTable("test_kind", {"k": 3})
    pairs.keep(pd.DataFrame({"M": [2.0], "seed": [0], "llc_mean": [5.0]}))
    built = pairs.build([(2, 0), (float("inf"), 0)], lambda items: pd.DataFrame(
        [{"M": M, "seed": s, "llc_mean": 1.0} for M, s in items]), on=("M", "seed"), progress=False)
    assert built["llc_mean"].tolist() == [5.0, 1.0]


def test_plateau_changes_on_hand_built_curves():
    steps = [0, 50, 100, 150, 200, 250, 300]
    llc = _curve(0, [1, 5, 9, 10, 11, 30, 31], steps)
    grid = np.arange(0, 301, 10)
    metrics = pd.DataFrame({"seed": 0, "step": grid, "apm": grid / 300, "loss": 3 - grid / 100})
    milestones = pd.DataFrame({"seed": [0], "partial_step": [100], "jump_step": [240]})
    row = llc_across.plateau_changes(llc, metrics, milestones).iloc[0]
    # the plateau runs from checkpoint 100 to 200 (the last before the jump at 240), the jump to the end (300)
    assert row["plateau: steps"] == "100 → 200" and row["jump: steps"] == "200 → 300"
    assert row["plateau: Δλ̂"] == 2 and row["jump: Δλ̂"] == 20
    assert row["plateau: Δλ̂ / SE"] == pytest.approx(2 / np.hypot(0.5, 0.5))
    assert row["plateau: ΔAPM"] == pytest.approx(1 / 3) and row["jump: Δloss"] == pytest.approx(-1)


def test_the_pages_own_questions_are_answered_seed_by_seed_and_can_fail():
    """The box of a page without verdicts answers its questions from the numbers, seed by seed: a λ̂ that stays
    within its noise on the plateau answers yes to 'flat', and a seed that disagrees is counted apart."""
    import pandas as pd
    from plateau_lib.book import pages
    from plateau_lib.plateau import llc_across
    changes = pd.DataFrame({"seed": [0, 1], "plateau: Δλ̂ / SE": [1.0, 9.0], "plateau: ΔAPM": [0.2, 0.3]})
    bounds = pd.DataFrame({"seed": [0, 1], "jump step": [220, 400], "nearest to the jump": [210, pd.NA],
                           "jump inside it": [True, False]})
    llc = pd.DataFrame({"seed": [0, 0, 1, 1], "step": [200, 250, 350, 450]})
    result = llc_across.PlateauLLC({"llc": llc}, {}, None, {}, None, bounds, changes)
    got = llc_across.answers(result).set_index("question")["answer"]
    assert list(got) == ["yes on 1 of 2 seeds, no on 1"] * 4
    assert llc_across.seed_answer(3, 3) == "yes, on all 3 seeds" and llc_across.seed_answer(0, 1) == "no, on 1 seed"
    box = pages.answers_box_html("no paper value", llc_across.answers(result), "two seeds")
    assert "No verdicts on this page: no paper value" in box and "answered on two seeds" in box
    assert box.count("<tr><td>") == 4
    with pytest.raises(ValueError, match="answered_on"):
        pages.glue_verdict_box([], {}, none="x", answers=llc_across.answers(result))
