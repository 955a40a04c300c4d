"""The transient-ridge search (issue 23): the rule that judges a curve (diversity.transient), its table and its trial configs."""
import math

import numpy as np
import pandas as pd
import pytest

from plateau_lib.icl import diversity, transient_search as ts

STEPS = np.unique(np.geomspace(1, 20_000, 60).astype(int))


def dip_and_return(low=1.0, start=2.0, end=1.6, at=0.55):
    """Falls from ``start`` to ``low`` at a fraction ``at`` of the log-steps, then climbs back to ``end``."""
    x = np.linspace(0, 1, len(STEPS))
    return np.where(x < at, start + (low - start) * x / at, low + (end - low) * (x - at) / (1 - at))


def test_a_dip_and_return_is_a_transient_with_t_crit_at_the_dip():
    out = diversity.transient(STEPS, dip_and_return(), dip_and_return(0.2, 3.0, 0.5))
    assert out["transient"]
    assert 0.3 < out["ood_rise"] < 0.6  # the lowest of the last fifth (it starts partway up the climb) over the dip
    assert abs(np.log(out["t_crit"]) - np.log(STEPS[int(0.55 * len(STEPS))])) < 0.3


def test_a_monotone_fall_is_no_transient():
    fall = np.linspace(2.0, 1.0, len(STEPS))
    out = diversity.transient(STEPS, fall, fall)
    assert not out["transient"] and out["t_crit"] == STEPS[-1] and out["ood_rise"] == 0


def test_noise_of_the_dips_size_is_no_transient():
    rng = np.random.default_rng(0)
    for _ in range(20):  # flat curves whose noise spans 1.0 .. 1.6, the size of the dip above
        noisy = 1.3 + rng.uniform(-0.3, 0.3, len(STEPS))
        assert not diversity.transient(STEPS, noisy, 1.3 + rng.uniform(-0.3, 0.3, len(STEPS)))["transient"]


def test_a_rise_from_the_start_is_no_transient():
    """Low M go straight to dMMSE_M: the OOD loss climbs from its first value, with no dip before it."""
    climb = np.linspace(1.0, 1.5, len(STEPS))
    out = diversity.transient(STEPS, climb, climb)
    assert not out["transient"] and out["t_crit"] == STEPS[0] and out["ood_rise"] > 0.3 and out["ood_fall"] == 0


def test_a_late_rise_of_the_ood_loss_alone_is_no_transient():
    """Δ to ridge must also fall and then grow: an OOD rise with Δ still falling is not Carroll's transient."""
    assert not diversity.transient(STEPS, dip_and_return(), np.linspace(3.0, 0.2, len(STEPS)))["transient"]


def test_bad_curves_are_refused():
    with pytest.raises(ValueError, match="equal length"):
        diversity.transient(STEPS, dip_and_return()[:-1], dip_and_return())
    with pytest.raises(ValueError, match="equal length"):
        diversity.transient(STEPS[:5], dip_and_return()[:5], dip_and_return()[:5])


def test_the_search_table_round_trips_and_replaces_a_rows_older_version(tmp_path, use_store):
    use_store(committed=tmp_path)
    assert ts.table().empty
    row = {"trial": "w64", "change": "first setting", "M": 32, "t_crit": 1500, "ood_rise": 0.2, "transient": True}
    ts.keep_row(row)
    ts.keep_row({**row, "M": math.inf, "transient": False})
    ts.keep_row({**row, "t_crit": 1700})
    table = ts.table()
    assert len(table) == 2 and set(table["M"]) == {32, math.inf}
    assert table.loc[table["M"] == 32, "t_crit"].item() == 1700
    pd.testing.assert_frame_equal(table, pd.read_csv(tmp_path / ts.TABLE))


def test_trial_configs_change_one_thing_and_refuse_unknown_names():
    base, wide = ts.trial_config("w64", 32), ts.trial_config("w128", 32)
    assert base.task_kwargs["M"] == 32 and ts.trial_config("w64", math.inf).task_kwargs["M"] is None
    assert (base.task_kwargs["D"], base.task_kwargs["K"], base.task_kwargs["noise_var"]) == (8, 16, 0.125)
    changed = {k for k, v in wide.to_dict().items() if base.to_dict()[k] != v}
    assert changed == {"d_model", "task_kwargs"}
    with pytest.raises(ValueError, match="unknown trial 'w9'; allowed"):
        ts.trial_config("w9", 32)
    with pytest.raises(ValueError, match="Ms"):
        ts.trial_config("w64", 0)


def test_the_page_totals_and_tables_are_drawn_from_the_rows():
    rows = pd.DataFrame([{"trial": "w64", "change": "first", "M": 16, "params": 1, "steps": 10, "cpu_s": 60.0,
                          "t_crit": 2068, "ood_rise": 0.19, "ridge_regrowth": 0.3, "final_delta_dmmse": 1.0,
                          "final_delta_ridge": 2.0, "transient": True, "min_ood_loss": 1.0},
                         {"trial": "w64", "change": "first", "M": 64, "params": 1, "steps": 10, "cpu_s": 60.0,
                          "t_crit": 9000, "ood_rise": 0.004, "ridge_regrowth": 0.01, "final_delta_dmmse": 1.0,
                          "final_delta_ridge": 2.0, "transient": False, "min_ood_loss": 1.0}])
    assert ts.search_totals(rows) == {"runs": 2, "trials": 1, "cpu_hours": pytest.approx(120 / 3600), "gpu_minutes": 0}
    trials = ts.trials_table(rows)
    assert list(trials.index) == ["w64"] and trials.loc["w64", "transient"] == "1 of 2 runs"
    assert trials.loc["w64", "tᶜʳⁱᵗ by M"] == "16: 2,068" and trials.loc["w64", "OOD rise after tᶜʳⁱᵗ"] == "19%"
    assert trials.loc["w64", "stopped"] == "" and trials.loc["w64", "M"] == "16, 64"
    shown = ts.readable(rows)
    assert list(shown.index) == [("w64", "16", 0), ("w64", "64", 0)] and list(shown["transient"]) == ["yes", "no"]
    # a run begun on a GPU and finished on a CPU counts each part once; an older GPU row's time is GPU time
    rows = pd.concat([rows.assign(device="cpu"), rows.assign(trial="w128", M=[16, 32], seed=[0, 0], cpu_s=[3000.0, 3600.0],
                                                            gpu_s=[600.0, 600.0], device="cpu")], ignore_index=True)
    rows.loc[len(rows)] = {**rows.iloc[0].to_dict(), "trial": "w64-50k", "device": "cuda", "cpu_s": 300.0, "gpu_s": None}
    totals = ts.search_totals(rows)
    assert (totals["runs"], totals["trials"]) == (5, 3) and f"{totals['cpu_hours']:.1f}" == "1.9" and totals["gpu_minutes"] == 15
    trials = ts.trials_table(rows)
    assert list(trials.index) == ["w64", "w128", "w64-50k"] and trials.loc["w128", "transient"] == "1 of 2 runs"
    assert trials.loc["w128", "OOD rise after tᶜʳⁱᵗ"] == "19%" and trials.loc["w64-50k", "tᶜʳⁱᵗ by M"] == "16: 2,068"
    assert ts.readable(rows).loc[("w128", "32", 0), "minutes"] == "10.0 GPU + 60.0 CPU"
    assert ts.readable(rows).loc[("w64", "16", 0), "minutes"] == "1.0 CPU"
    assert "what changed" not in shown.columns and ts.search_totals(pd.DataFrame())["runs"] == 0
    assert ts.trials_table(pd.DataFrame()).empty and list(ts.trials_table(pd.DataFrame()).columns) == ts.TRIAL_COLUMNS[1:]


def test_a_stopped_trial_keeps_rows_so_far_and_its_finished_run_replaces_them(tmp_path, monkeypatch, use_store):
    """A run stopped before its last step is kept as a row marked steps_done < steps, with its curves committed
    apart; the same command resumes it, and its finished row replaces the stopped one and drops those curves."""
    from plateau_lib.engine import cache
    from plateau_lib.engine.train import train
    monkeypatch.setattr(cache, "ROOT", tmp_path)
    use_store(committed=tmp_path / "committed", local=tmp_path / "local")
    tiny = {"d_model": 8, "steps": 40, "eval_every": 40, "eval_steps": list(range(0, 41, 2)), "batch_size": 8,
            "eval_batch": 32, "task_kwargs": {**ts.BASE.task_kwargs, "d_mlp": 16}}
    monkeypatch.setitem(ts.TRIALS, "tiny", ("a tiny setting", tiny))
    cfg = ts.trial_config("tiny", 16)
    with pytest.raises(KeyboardInterrupt):
        train(cfg, run_dir=cache.current().local / f"train-{cache.cache_key(cfg)}.partial", save_every=1,
              progress=False, stop_after=24)
    (row,) = ts.record_stopped("tiny", [16])
    assert row["steps_done"] == 24 < row["steps"] == 40
    assert ts.readable(ts.table())["steps"].item() == "24 of 40"
    assert ts.readable(ts.table())["transient"].item().endswith("(so far)")
    assert ts.trials_table(ts.table()).loc["tiny", "stopped"] == "at step 24 of 40 on a CPU"
    assert set(ts.search_curves(ts.table())["step"]) == set(range(0, 25, 2))
    # the resume state is committed in progress; another machine (no local state) resumes from it, not from 0
    import shutil
    from plateau_lib.engine import carried
    kept = carried.folder(f"transient_search-{cache.cache_key(cfg)}")
    assert carried.resume_step(kept / "resume.pt") == 24
    shutil.rmtree(cache.current().working(cfg))
    restored, restore = [], carried.restore
    monkeypatch.setattr(carried, "restore", lambda *a, **k: restored.append(restore(*a, **k)) or restored[-1])
    (done,) = ts.run_trials("tiny", [16], progress=False)
    assert restored == [24] and not kept.exists()
    assert done["steps_done"] == done["steps"] == 40 and len(ts.table()) == 1
    assert ts.stopped_curves().empty and ts.search_curves(ts.table())["step"].max() == 40


def test_llc_over_training_texts_read_the_peak_the_fall_and_the_gap_to_seed_0():
    table = pd.DataFrame({"M": [8] * 3 + [16] * 3, "seed": 1, "step": [500, 6000, 50000] * 2,
                          "llc_mean": [100.0, 200.0, 50.0, 100.0, 150.0, 120.0]})
    final = pd.DataFrame({"M": [8, 16], "seed": [0, 0], "llc_mean": [55.0, 120.0]})
    texts = ts.llc_over_training_texts(table, final)
    assert (texts["peak_8"], texts["fall_8"], texts["peak_16"], texts["fall_16"]) == ("6,000", "75%", "6,000", "20%")
    assert texts["final_gap"] == "0%–9%" and texts["peak_32"] == texts["fall_32"] == "–"
    assert set(ts.llc_over_training_texts(None, None).values()) == {"–"}
