"""Task-diversity tables: the M grid's validation, t_crit as the argmin, the behavioural switch, the
predictors on the root-task probe (dMMSE_1 = t_1ᵀx exactly), and a run's root-task predictions."""
import math

import numpy as np
import pandas as pd
import pytest
import torch

from plateau_lib.engine.runs import TrainConfig

from plateau_lib.engine.train import train
from plateau_lib.icl import baselines, data, diversity, presets as icl_presets
from plateau_lib.llc import SGLDConfig

BASE = TrainConfig(task="icl_regression", task_kwargs={"D": 2, "K": 4, "noise_var": 0.125, "n_root": 3},
                   n_layer=1, n_head=1, d_model=8, steps=20, batch_size=8, eval_every=10, eval_batch=16, device="cpu")


@pytest.mark.parametrize("Ms, match", [([], "empty"), ([0], "positive"), ([-2], "positive"), ([1.5], "positive"),
                                       ([2, 2], "repeats"), ("16", "list")])
def test_bad_M_grid(Ms, match):
    with pytest.raises(ValueError, match=match):
        icl_presets.configs(BASE, Ms)


def test_configs_nested_and_labelled():
    runs = icl_presets.configs(BASE, [1, 4, None], seeds=[0, 3])
    assert list(runs) == [(1, 0), (1, 3), (4, 0), (4, 3), (math.inf, 0), (math.inf, 3)]
    assert runs[(math.inf, 3)].task_kwargs["M"] is None and runs[(4, 3)].seed == 3
    t4, t1 = runs[(4, 0)].make_task().tasks(), runs[(1, 0)].make_task().tasks()
    assert torch.equal(t4[:1], t1)  # T_1 ⊂ T_4: the root task is shared
    with pytest.raises(ValueError, match="seeds"):
        icl_presets.configs(BASE, [1], seeds=[])


def fake_curves(ood_by_M: dict) -> pd.DataFrame:
    rows = [{"step": 10 * i, "M": M, "seed": 0, "ood_loss": v, "delta_dmmse": 0.0, "delta_ridge": 0.0}
            for M, values in ood_by_M.items() for i, v in enumerate(values)]
    return pd.DataFrame(rows)


def test_t_crit_is_the_argmin_of_the_ood_loss():
    table = diversity.critical_steps(fake_curves({4: [3.0, 2.0, 1.0, 1.5, 2.5], 64: [3.0, 2.0, 1.0, 0.9, 0.8]}))
    by_M = table.set_index("M")
    assert by_M.loc[4, "t_crit"] == 20 and by_M.loc[4, "rise_after_min"] == pytest.approx(1.5)
    assert by_M.loc[64, "t_crit"] == 40 and by_M.loc[64, "rise_after_min"] == 0.0


def test_switch_M():
    final = pd.DataFrame({"M": [1, 4, 16, 64, math.inf], "seed": 0, "delta_dmmse": [0.0, 0.1, 0.5, 0.6, 0.1],
                          "delta_ridge": [1.0, 0.5, 0.2, 0.1, 0.1]})
    assert diversity.switch_M(final) == 16
    assert diversity.switch_M(final.assign(delta_ridge=2.0)) is None
    # a model nearer ridge at M = 4 but back to dMMSE at 16 does not switch at 4
    assert diversity.switch_M(final.assign(delta_ridge=[1.0, 0.05, 0.6, 0.1, 0.1])) == 64


def test_predictor_rows_on_the_root_probe():
    kwargs = {**BASE.task_kwargs, "task_seed": 5}
    rows = diversity.predictor_rows(kwargs, [1, 2, math.inf])
    assert set(rows) == {("ridge", math.inf), ("dMMSE", 1), ("dMMSE", 2)}
    xs, ys, ws = data.root_probe(3, 4, 2, 0.125, task_seed=5)
    t1 = data.task_set(1, 2, 5)[0]
    assert torch.equal(ws, t1.expand(3, 2))  # every probe sequence is the root task
    np.testing.assert_allclose(rows[("dMMSE", 1)], (xs @ t1).reshape(-1).double().numpy(), rtol=1e-6)
    np.testing.assert_allclose(rows[("ridge", math.inf)], baselines.ridge_predict(xs, ys, 0.125).reshape(-1), rtol=1e-6)


def test_a_run_keeps_its_root_predictions_and_curves_read_them():
    runs = icl_presets.configs(BASE, [2, math.inf])
    results = {label: train(cfg, progress=False) for label, cfg in runs.items()}
    rows, steps = diversity.trajectory_rows(results)
    assert rows[(2, 0)].shape == (3, 3 * 4) and list(steps[(2, 0)]) == [0, 10, 20]
    curves = diversity.curves(results)
    assert set(curves["M"]) == {2, math.inf} and curves["ood_loss"].notna().all()
    inf = curves[curves["M"] == math.inf]
    assert (inf["ood_loss"] == inf["id_loss"]).all()  # for M = ∞ the training distribution is q_∞
    assert results[(2, 0)].arrays["pred_root"].shape == (3, 3, 4)
    assert results[(2, 0)].arrays["pred_root"].dtype == np.float16  # kept at half precision, for the PCA only
    assert rows[(2, 0)].dtype == np.float64
    with pytest.raises(ValueError, match="n_root"):
        results[(2, 0)].arrays.pop("pred_root")
        diversity.trajectory_rows(results)


def test_ideal_losses_known_answers():
    """dMMSE_1 knows the task: its loss on q_1 is the noise σ²; at M = ∞ dMMSE is ridge."""
    table = diversity.ideal_losses({**BASE.task_kwargs, "K": 8}, [1, 4, math.inf], n=4096).set_index("M")
    assert table.loc[1, "loss_dmmse"] == pytest.approx(0.125, rel=0.06)
    assert table.loc[1, "loss_dmmse"] < table.loc[4, "loss_dmmse"] < table.loc[4, "loss_ridge"]
    assert table.loc[math.inf, "loss_dmmse"] == table.loc[math.inf, "loss_ridge"]
    assert table.loc[math.inf, "delta_dmmse_ridge"] == 0.0
    assert table.loc[1, "ood_dmmse"] > table.loc[1, "ood_ridge"]  # one memorised task is useless on new ones


def test_transient_Ms_reads_a_dip_then_rise():
    """The page's rule (transient_search.transient) on 30-evaluation curves: a dip and return at M = 16 (Δ to
    ridge regrowing with it), a 3% return at 64, a monotone fall at 2; ∞ is never counted."""
    from plateau_lib.icl import diversity_page as dp
    x = np.linspace(0, 1, 30)
    dip = 1 + 2 * (x - 0.3) ** 2          # falls to its minimum at 30% of the run, returns 49% above it
    small = 1 + 0.06 * (x - 0.3) ** 2     # the same shape, 3% above its minimum at the end
    shapes = {2: 1 + np.exp(-5 * x), 16: dip, 64: small, math.inf: dip}
    curves = pd.DataFrame([{"step": 100 * i, "M": M, "seed": 0, "ood_loss": v, "delta_ridge_ood": v - 0.9,
                            "delta_dmmse": 0.0, "delta_ridge": 0.0} for M, c in shapes.items() for i, v in enumerate(c)])
    sweep = dp.Sweep("cpu", {}, {}, {}, curves, diversity.final(curves), None, None)
    assert dp.transient_Ms(sweep) == [16]
    assert abs(dp.transients(sweep).loc[16, "t_crit"] - 900) <= 100  # within an evaluation of 30% of the run


def test_presets_bad_input_before_compute():
    from plateau_lib.icl import diversity_page as dp
    from plateau_lib.icl.presets import diversity as preset_sweep
    with pytest.raises(ValueError, match="preset"):
        preset_sweep("gpu")
    with pytest.raises(ValueError, match="SGLD setting"):
        preset_sweep("cpu", num_chain=3)
    with pytest.raises(ValueError, match="steps"):
        dp.sweep_settings("cpu", steps=5)
    with pytest.raises(ValueError, match="seeds"):
        dp.sweep_settings("cpu", seeds="[-1]")
    configs, _ = dp.sweep_settings("cpu", Ms="[1, null]", steps=300)  # papermill passes strings
    assert list(configs) == [(1, 0), (math.inf, 0)] and configs[(1, 0)].steps == 300


def test_paper_sweep_is_carrolls_setting():
    from plateau_lib.icl.presets import diversity as preset_sweep
    configs, _ = preset_sweep("paper")
    cfg = configs[(1024, 0)]
    assert {k: cfg.task_kwargs[k] for k in ("D", "K", "noise_var")} == {"D": 8, "K": 16, "noise_var": 0.125}
    assert sum(p.numel() for p in cfg.make_task().build_model(cfg).parameters()) == 2_641_417  # "2.65 million"
    assert sorted(M for M, _ in configs)[-2:] == [1024, math.inf]


def test_the_sweep_takes_the_largest_step_before_lambda_grows_by_the_one_rule():
    rows = [(M, eps, v) for M, values in {2: [2.9, 2.8, 3.1, 13.5], 8: [23.3, 23.8, 31.0, 40.0]}.items()
            for eps, v in zip([1e-4, 3e-4, 1e-3, 3e-3], values)]
    table = pd.DataFrame(rows, columns=["M", "epsilon", "llc_final"]).assign(
        num_diverged=0, negative=False, converged=True, nbeta=46.0, gamma=100.0)
    assert diversity.chosen_epsilon(table) == 3e-4  # 1e-3 moves M = 8 by 30%
    assert diversity.chosen_epsilon(table, flat_tolerance=0.5) == 1e-3
    table.loc[(table["epsilon"] == 3e-4) & (table["M"] == 8), "num_diverged"] = 1
    assert diversity.chosen_epsilon(table) == 1e-4  # 3e-4 diverges at M = 8; 1e-3 is not flat: the smallest ε
    table["converged"] = False
    assert diversity.chosen_epsilon(table) is None


def test_llc_table_resumes_from_its_kept_rows(tmp_path, use_store):
    """Rows kept before an interruption are reused, not re-estimated; the finished table drops the partial."""
    use_store(committed=tmp_path / "committed", local=tmp_path / "local")
    configs = icl_presets.configs(BASE, [2, math.inf])
    llc = SGLDConfig(epsilon=1e-4, gamma=100.0, nbeta=None, batch_size=8, num_chains=1, num_draws=5,
                     num_burnin_steps=0, n_data=32, seed=0)
    stored = diversity.llc_table(configs, llc)
    kept = pd.DataFrame([{"M": 2, "seed": 0, "step": 20, "llc_mean": 123.0, "llc_se": 0.0, "elapsed_s": 0.0}])
    stored.keep(kept)
    table, _ = diversity.llc_vs_M(configs, llc, progress=False)
    assert table.loc[table["M"] == 2, "llc_mean"].item() == 123.0  # kept, not recomputed
    assert np.isfinite(table.loc[table["M"] == math.inf, "llc_mean"].item())  # the missing row was estimated
    assert stored.rows().empty  # partial dropped once stored


def test_llc_over_training_estimates_every_checkpoint_and_the_final_weights_and_resumes(tmp_path, use_store):
    """One row per (M, seed, step): each checkpoint and the final weights; a row kept before an interruption is
    reused; a run without checkpoints is refused before any compute."""
    use_store(committed=tmp_path / "committed", local=tmp_path / "local")
    runs = icl_presets.configs(BASE.replace(checkpoint_steps=(5, 10)), [4, 8])
    llc = SGLDConfig(epsilon=1e-4, gamma=100.0, nbeta=None, batch_size=8, num_chains=1, num_draws=5,
                     num_burnin_steps=0, n_data=32, seed=0)
    kept = pd.DataFrame([{"step": 5, "llc_mean": 123.0, "llc_se": 0.0, "elapsed_s": 0.0}])
    diversity.llc_training_rows(runs[(4, 0)], llc).keep(kept)
    assert diversity.llc_over_training(runs, llc, progress=False, only=[(8, 0)]) is None  # M = 4 not done yet
    table, meta = diversity.llc_over_training(runs, llc, progress=False, only=[(4, 0)])  # M = 8's rows are kept
    assert list(table["step"]) == [5, 10, BASE.steps] * 2 and list(table["M"]) == [4] * 3 + [8] * 3
    assert table.loc[table["step"] == 5, "llc_mean"].iloc[0] == 123.0  # kept, not recomputed
    assert np.isfinite(table["llc_mean"]).all()
    assert diversity.load_llc_over_training(runs, llc) is not None  # stored
    with pytest.raises(ValueError, match="checkpoint_steps"):
        diversity.llc_over_training(icl_presets.configs(BASE, [4]), llc, progress=False)
    with pytest.raises(ValueError, match="'only' names runs not in 'runs'"):
        diversity.llc_over_training(runs, llc, progress=False, only=[(16, 0)])
    assert meta["llc_wall_s"] >= 0


def test_an_order_is_read_on_the_evaluation_grid():
    """A hand-built tie gives at most partly; 1-2 evaluations apart is not resolved; 3 or more is an order."""
    from plateau_lib.icl import diversity_page as dp
    from plateau_lib.icl.claims import claims_of
    (claim,) = [c for c in claims_of("Carroll Figs. 1, 3 (transient ridge)") if c.metric.startswith("tᶜʳⁱᵗ")]
    grid = [0, 100, 200, 300, 400, 500, 600, 700]
    assert dp.resolved_steps([200, 200, 500], grid).tolist() == [0, 3]
    assert claim.judge(dp.resolved_steps([200, 200, 500], grid).min(), "paper") == "partly"       # a tie
    assert claim.judge(dp.resolved_steps([200, 300, 600], grid).min(), "paper") == "partly"       # one apart
    assert claim.judge(dp.resolved_steps([100, 400, 700], grid).min(), "paper") == "reproduced"
    assert claim.judge(dp.resolved_steps([400, 200, 700], grid).min(), "paper") == "not reproduced"  # reversed


def test_the_transient_count_is_judged_against_the_papers_range():
    from plateau_lib.icl import diversity_page as dp
    finite = [4, 8, 16, 32, 64, 128, 256]
    assert dp.transient_share(finite, [8, 16, 32]) == 0.5       # 16 and 32 of 16, 32, 64, 128
    assert dp.transient_share(finite, [16, 32, 64, 128]) == 1.0
    assert dp.transient_share([1, 2, 4], [2]) is None            # no M in the paper's range


def test_the_papers_M_fall_on_the_categorical_axis_in_log_M():
    from plateau_lib.icl import diversity_page as dp
    Ms = [4, 8, 16, 32, 64, 128, 256, math.inf]
    assert dp.M_position(Ms, 64) == 4.0
    assert dp.M_position(Ms, 128 * 2 ** 0.5) == pytest.approx(5.5)    # halfway between 128 and 256 in log M
    assert dp.M_position(Ms, 362) == 6.5                              # past 256: half a tick, before ∞
    assert dp.M_position([1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, math.inf], 362) == pytest.approx(8.5, abs=0.01)


def _page_sweep():
    """A hand-built sweep of the ``cpu`` preset: M = 16 dips at 30% of the run and returns, M = 32 at 45%; M = 2
    ends nearer dMMSE_M, M = 64 nearer ridge; M = 1 and 8 of the preset's grid are not committed."""
    from plateau_lib.icl import diversity_page as dp
    x = np.linspace(0, 1, 30)
    shapes = {2: 1 + np.exp(-5 * x), 16: 1 + 2 * (x - 0.3) ** 2, 32: 1 + 2 * (x - 0.45) ** 2,
              64: 1 + 0.06 * (x - 0.3) ** 2, math.inf: 1 + 2 * (x - 0.3) ** 2}
    ends = {2: (0.01, 0.5), 16: (0.2, 0.3), 32: (0.2, 0.3), 64: (0.4, 0.02), math.inf: (0.0, 0.0)}
    curves = pd.DataFrame([{"step": 100 * i, "M": M, "seed": 0, "ood_loss": v, "delta_ridge_ood": v - 0.9,
                            "delta_dmmse": ends[M][0], "delta_ridge": ends[M][1], "id_loss": 0.5}
                           for M, c in shapes.items() for i, v in enumerate(c)])
    return dp.Sweep("cpu", {(M, 0): None for M in shapes}, {}, {}, curves, diversity.final(curves), None, None)


def test_transient_summary_gives_the_pages_numbers():
    from plateau_lib.book.pages import MISSING
    from plateau_lib.icl import diversity_page as dp
    sweep = _page_sweep()
    t = dp.transients(sweep)
    summary = dp.transient_summary(sweep)
    assert summary["Ms"] == "16, 32" and summary["order_label"] == "resolved" and int(summary["order"]) >= 3
    assert summary["t_crit"] == f"16: {int(t.loc[16, 't_crit']):,}, 32: {int(t.loc[32, 't_crit']):,}"
    assert (summary["low_M"], summary["low_nearer"], summary["low_dmmse"], summary["low_ridge"]) == ("2", "dMMSE_M", "0.010", "0.500")
    assert (summary["high_M"], summary["high_nearer"], summary["high_dmmse"], summary["high_ridge"]) == ("64", "ridge", "0.400", "0.020")
    assert summary["not_committed"] == "1, 8"
    assert set(dp.transient_summary(None).values()) == {MISSING} and dp.transient_summary(None).keys() == summary.keys()
    assert dp.committed_label(sweep) == "committed" and dp.committed_label(None) == "not among the committed results"
    assert dp.switch_text(None) == MISSING


def test_the_closing_tables_per_sweep_and_per_M():
    from plateau_lib.book.pages import MISSING
    from plateau_lib.icl import diversity_page as dp
    sweep = _page_sweep()
    sweeps = dp.sweeps_table({"cpu": sweep})
    assert list(sweeps.index) == ["live cpu sweep"]
    row = sweeps.loc["live cpu sweep"]
    assert (row["steps"], row["training (s)"], row["LLC (s)"]) == ("2,900", "0", MISSING)
    assert row["M with a transient"] == "16, 32" and row["behavioural switch"] == dp.switch_text(sweep) == "M = 64"
    every = dp.every_M_table({"cpu": sweep})
    assert list(every.columns) == dp.EVERY_M_COLUMNS and every.index.names == ["sweep", "M"]
    assert every.loc[("live cpu sweep", "2"), "nearer to"] == "dMMSE_M" and every.loc[("live cpu sweep", "64"), "nearer to"] == "ridge"
    assert (every["λ̂"] == MISSING).all()  # no LLC table


def test_claims_are_judged_at_each_complete_seed_never_on_the_seed_mean():
    """Seed 0 has every M and reaches tᶜʳⁱᵗ at M = 32 before M = 16 (a reversal); seed 1, trained at M = 16 and 32
    only, dips the other way round, so the mean curves show a tie. The claims read seed 0 alone, and the per-seed
    list names both seeds' transients."""
    from plateau_lib.book.verdicts import BySeed
    from plateau_lib.icl import diversity_page as dp
    x = np.linspace(0, 1, 30)
    dips = {(2, 0): None, (16, 0): 0.45, (32, 0): 0.3, (64, 0): None, (math.inf, 0): None, (16, 1): 0.3, (32, 1): 0.45}
    ends = {2: (0.01, 0.5), 16: (0.2, 0.3), 32: (0.2, 0.3), 64: (0.4, 0.02), math.inf: (0.0, 0.0)}
    curves = pd.DataFrame([{"step": 100 * i, "M": M, "seed": seed, "ood_loss": v, "delta_ridge_ood": v - 0.9,
                            "delta_dmmse": ends[M][0], "delta_ridge": ends[M][1], "id_loss": 0.5}
                           for (M, seed), dip in dips.items()
                           for i, v in enumerate(1 + np.exp(-5 * x) if dip is None else 1 + 2 * (x - dip) ** 2)])
    sweep = dp.Sweep("cpu", dict.fromkeys(dips), {}, {}, curves, diversity.final(curves), None, None)
    assert dp.complete_seeds(sweep) == [0]
    order = "tᶜʳⁱᵗ's smallest step up between consecutive M with a transient (evaluations of the grid)"
    values = dp.seed_by_seed(dp.transient_values, sweep)
    assert isinstance(values[order], BySeed) and list(values[order].values) == [0]
    assert values[order].values[0] < 0 == dp.transient_values(sweep)[order]  # the mean shows a tie
    assert dp.seed_transients(sweep) == "16 at 1,200 and 32 at 800 (seed 0); 16 at 800 and 32 at 1,200 (seed 1)"


def test_a_sweep_made_M_by_M_is_shown_from_its_first_run_and_names_the_rest(tmp_path, use_store, monkeypatch):
    """The paper sweep comes in M by M from lent GPUs: ``paper_so_far`` shows it from one committed M on (the
    complete ``stored`` sweep still needs every M), and ``so_far_texts`` names each run's seconds and the M left."""
    from plateau_lib.engine.sweep import sweep
    from plateau_lib.icl import diversity_page as dp
    use_store(committed=tmp_path / "committed", local=tmp_path / "local")
    configs, llc = icl_presets.diversity("cpu", [2, 16, None], overrides={"steps": 20, "eval_steps": [0, 10, 20]})
    monkeypatch.setattr(dp, "sweep_settings", lambda preset, *a, **k: (configs, llc))
    assert dp.paper_so_far({}) is None and dp.so_far_texts(None) == {"runs": "none", "left": "2, 16, ∞"}
    sweep({(16, 0): configs[(16, 0)]}, progress=False)
    so_far = dp.paper_so_far({})
    assert list(so_far.configs) == [(16, 0)] and dp.stored("paper") is None
    texts = dp.so_far_texts(so_far)
    assert texts["left"] == "2, ∞" and texts["runs"].startswith("M = 16 in ") and texts["runs"].endswith(" s (on cpu)")
    assert dp.paper_so_far({"paper": so_far}) is None  # the whole sweep shown: nothing more to show run by run


def test_the_paper_queue_trains_carrolls_sweep_in_the_order_that_decides_it_soonest():
    """A transient M (64), a ridge M (512), ∞, the switch (256), then outwards from 64; every M once."""
    labels = list(icl_presets.page_runs("paper")["transient_ridge"])
    assert [M for _, M, _ in labels] == [64, 512, math.inf, 256, 32, 128, 16, 8, 4, 1024, 2, 1]
