"""The stages diagnosis's runs: kept checkpoints, a state that resumes across sessions, λ̂ rows kept one by one."""
import json

import numpy as np
import pandas as pd
import pytest
import torch

from plateau_lib.engine.train import train
from plateau_lib.icl import diagnosis
from plateau_lib.icl.presets import ICL_LLC_REDUCED, ICL_PAPER
from plateau_lib.llc import SGLDConfig

TINY = ICL_PAPER.replace(d_model=8, n_head=2, batch_size=8, eval_batch=16, steps=990, eval_every=500,
                         checkpoint_steps=(0, 984), eval_steps=(10, 984), device="cpu")


@pytest.fixture
def store(tmp_path, use_store):
    use_store(committed=tmp_path, local=tmp_path / "local")  # the states in tmp_path / "in_progress"
    return tmp_path


def test_kept_steps_are_the_paper_checkpoints_nearest_the_targets():
    assert diagnosis.KEPT_STEPS[:5] == (984, 5050, 10100, 20201, 40292)
    assert set(diagnosis.KEPT_STEPS) <= set(ICL_PAPER.checkpoint_steps) and diagnosis.KEPT_STEPS[-1] == 499_999
    assert {126_262, 318_181} <= set(diagnosis.KEPT_STEPS)  # the paper's 126k and 320k
    # seed 1 in float32 is the paper's config itself: the committed stages run's key, with the stream in the name
    assert diagnosis.name(diagnosis.variant(), "cpu") == "icl_diagnosis-seed1-float32-cpu-9f3124abd06b377d"
    assert diagnosis.name(diagnosis.variant(), "cuda") != diagnosis.name(diagnosis.variant(), "cpu")


def test_a_stopped_run_resumes_from_its_state_and_ends_as_an_uninterrupted_run(store):
    (first,) = diagnosis.retrain([TINY], budget_s=0.0, progress_bar=False)
    assert first["status"] == "in progress" and 0 < first["step"] < TINY.steps
    folder = diagnosis.state_folder(TINY)
    assert (folder / "resume.pt").exists() and json.loads((folder / "progress.json").read_text())["step"] == first["step"]
    (done,) = diagnosis.retrain([TINY], budget_s=600, progress_bar=False)
    assert done["status"] == "finished" and done["step"] == TINY.steps and not (folder / "resume.pt").exists()
    assert [p.name for p in folder.glob("ckpt_*.pt")] == ["ckpt_000984.pt"]  # only the kept steps stay
    whole = train(TINY, progress=False)
    pd.testing.assert_frame_equal(pd.read_csv(folder / "metrics.csv"), whole.metrics, check_dtype=False,
                                  atol=1e-6, rtol=1e-5)
    kept = diagnosis.load_checkpoint(TINY, 984)
    assert set(kept) == set(whole.final_state)
    with pytest.raises(FileNotFoundError, match="kept steps"):
        diagnosis.load_checkpoint(TINY, 5050)


def test_llc_rows_are_kept_and_not_redone(store, monkeypatch):
    diagnosis.retrain([TINY], budget_s=600, progress_bar=False)
    calls = []
    real = diagnosis.llc_over_checkpoints
    monkeypatch.setattr(diagnosis, "llc_over_checkpoints", lambda *a, **k: calls.append(1) or real(*a, **k))
    small = ICL_LLC_REDUCED.replace(num_chains=2, num_draws=4, num_burnin_steps=0, n_data=64, batch_size=16)
    for _ in range(2):
        diagnosis.llc_at([(TINY, "cpu")], [984], llc=small)
    table = diagnosis.llc_table(TINY, "cpu")
    assert len(calls) == 1 and table["step"].tolist() == [984] and table["llc_mean"].notna().all()
    assert table["budget"].iloc[0] == "2 chains x 4 draws after 0"
    trace = np.load(diagnosis.trace_path(TINY, "cpu", 984, small))
    assert trace.shape == (2, 4)  # chains x steps, the estimate is its window (0, 4)
    row = table.iloc[0]
    assert diagnosis.window_llc(trace, row["init_loss"], small.nbeta, 0, 4) == pytest.approx(row["llc_mean"], rel=1e-4)
    monkeypatch.setattr(diagnosis, "ICL_LLC_REDUCED", SGLDConfig(num_burnin_steps=1, num_draws=2))
    windows = diagnosis.estimator_windows(TINY, "cpu", small)  # every draw, and the last two, on the same chains
    assert windows["step"].tolist() == [984]
    assert windows["authors' window"].iloc[0] == pytest.approx(row["llc_mean"], rel=1e-4)
    assert windows["stages page's window"].iloc[0] == pytest.approx(
        diagnosis.window_llc(trace, row["init_loss"], small.nbeta, 1, 2))
    settled = diagnosis.last_draws(TINY, "cpu", small, draws=2)  # the whole window, and its last two draws
    assert settled["window"].iloc[0] == pytest.approx(row["llc_mean"], rel=1e-4)
    assert settled["last draws"].iloc[0] == pytest.approx(
        diagnosis.window_llc(trace, row["init_loss"], small.nbeta, 2, 2))
    longer = small.replace(num_burnin_steps=2)  # another budget at the same step is a new row
    diagnosis.llc_at([(TINY, "cpu")], [984], llc=longer)
    assert len(calls) == 2 and diagnosis.llc_table(TINY, "cpu")["budget"].tolist() == [
        "2 chains x 4 draws after 0", "2 chains x 4 draws after 2"]
    with pytest.raises(ValueError, match="not kept checkpoints"):
        diagnosis.llc_at([(TINY, "cpu")], [1000], llc=small)


def test_a_window_of_the_loss_trace_gives_its_llc():
    """Known answer: losses 1 for 2 steps, then 3; L(w*) = 1, nβ = 10."""
    trace = np.array([[1.0, 1.0, 3.0, 3.0], [1.0, 1.0, 3.0, 3.0]])
    assert diagnosis.window_llc(trace, 1.0, 10.0, 0, 4) == pytest.approx(10.0)  # averaged from the first draw
    assert diagnosis.window_llc(trace, 1.0, 10.0, 2, 2) == pytest.approx(20.0)  # after a burn-in of 2
    with pytest.raises(ValueError, match="inside the trace"):
        diagnosis.window_llc(trace, 1.0, 10.0, 2, 3)


def test_seed_spread_and_precision_gap_on_a_hand_built_table():
    rows = [(seed, ops, "GPU", step, loss) for seed, ops, step, loss in [
        (0, "float32", 10, 2.0), (1, "float32", 10, 2.5), (2, "float32", 10, 2.2),
        (0, "bfloat16", 10, 2.01), (1, "bfloat16", 10, 2.47), (0, "float32", 20, 1.0), (0, "bfloat16", 20, 1.1)]]
    table = pd.DataFrame(rows, columns=["seed", "operands", "data", "step", "loss"])
    spread = diagnosis.seed_spread(table, 10, "loss")
    assert spread["seed 1"] == 2.5 and (spread["others low"], spread["others high"]) == (2.0, 2.2)
    assert spread["seeds"] == [0, 1, 2] and spread["sd"] == pytest.approx(pd.Series([2.0, 2.5, 2.2]).std())
    gap = diagnosis.precision_gap(table, "loss")
    # three matched (seed, step) pairs, the largest gap 0.1 at step 20; step 20 has one float32 seed (no spread),
    # so the share is step 10's largest gap (seed 1: 0.03) over step 10's spread
    assert gap["pairs"] == 3 and gap["max gap"] == pytest.approx(0.1) and gap["last step"] == 20
    assert gap["max share of seed sd"] == pytest.approx(0.03 / spread["sd"])


def test_a_gpu_run_goes_on_here_with_a_new_data_stream(store):
    """A state whose generator is another device's (a GPU run's) continues on the CPU, reseeded at its step, in
    its own folder; its progress says where its stream was reseeded."""
    (first,) = diagnosis.retrain([TINY], budget_s=0.0, progress_bar=False)
    gpu = diagnosis.state_folder(TINY, "cuda")
    gpu.mkdir(parents=True)
    state = torch.load(diagnosis.state_folder(TINY) / "resume.pt", weights_only=True)
    state["gen"] = torch.zeros(16, dtype=torch.uint8)  # a CUDA generator's state: seed and offset, 16 bytes
    torch.save(state, gpu / "resume.pt")
    (done,) = diagnosis.retrain([TINY], budget_s=600, progress_bar=False, stream="cuda")
    assert done["status"] == "finished" and done["meta"]["data_stream_reseeded_at"] == first["step"]
    assert (gpu / "metrics.csv").exists() and diagnosis.progress(TINY, "cpu")["status"] == "in progress"


class Zero(torch.nn.Module):
    """Predicts 0 for every token: its loss is the targets' mean square."""

    def forward(self, xs, ys, **_):
        return torch.zeros_like(ys)


def test_the_authors_ood_losses_use_noise_of_std_not_variance_0_125():
    """Closed form for the zero predictor: E[(g wᵀx + ε)²] = g² D + σ², σ = 0.125 (σ² = 0.0156, not 0.125)."""
    for g, D in ((1e-3, 4), (5.0, 4)):
        task = ICL_PAPER.replace(task_kwargs={**ICL_PAPER.task_kwargs, "ood_scale": g}).make_task()
        out = diagnosis.authors_ood_losses(Zero(), task, 2**14)
        expected = g**2 * D + 0.125**2
        assert out["loss_ood_inputs_authors"] == pytest.approx(expected, rel=0.03 if g > 1 else 0.02)
        assert out["loss_ood_tasks_authors"] == pytest.approx(expected, rel=0.03 if g > 1 else 0.02)


def test_layer_norm_weights_are_each_norms_mean_absolute_weight():
    model = TINY.make_task().build_model(TINY)
    for i, (key, path) in enumerate(diagnosis.LAYER_NORMS.items()):
        weight = dict(model.named_modules())[path].weight
        with torch.no_grad():
            weight.copy_(torch.tensor([(-1) ** j * 0.1 * (i + 1) for j in range(len(weight))]))
    assert diagnosis.layer_norm_weights(model) == pytest.approx({k: 0.1 * (i + 1) for i, k in
                                                                 enumerate(diagnosis.LAYER_NORMS)})


def test_the_other_seeds_table_reads_the_fall_from_their_llc_rows():
    """Given λ̂ at 40,292 and at the end of LR4, the seed's row gives the fall's ratio and ``fall_values`` the paper's
    beside it; without the late row the ratio is missing and no seed has fallen."""
    from plateau_lib.icl import diagnosis_page
    runs = [(diagnosis.variant(0), "cuda"), (diagnosis.variant(1), "cuda"), (diagnosis.variant(2, "bfloat16"), "cuda")]
    budget = diagnosis.budget_label(ICL_LLC_REDUCED)
    llc = pd.DataFrame([{"seed": 0, "data": "GPU", "operands": "float32", "budget": budget, "step": s, "llc_mean": v}
                        for s, v in ((diagnosis_page.STEP_40K, 170.0), (diagnosis_page.LATE_STEP, 110.0),
                                     (diagnosis.KEPT_STEPS[0], 20.0))])
    later = diagnosis_page.later_seeds(llc, runs)
    assert later.index.tolist() == [0]  # seed 1 and the bfloat16 run are not the other float32 seeds
    row = later.loc[0]
    assert row["ratio"] == pytest.approx(110 / 170) and row["checkpoints with λ̂"] == 3
    assert row["λ̂ highest at"] == diagnosis_page.STEP_40K and np.isnan(row[f"λ̂ at {diagnosis.END_STEP:,}"])
    falls = diagnosis_page.fall_values(later)
    assert falls["seeds"] == [0] and falls["ratios"] == [pytest.approx(110 / 170)]
    assert (falls["paper"], falls["paper_late"]) == ([169, 171], [113, 131])  # the reference notes
    assert falls["paper_ratio"] == [pytest.approx(113 / 171), pytest.approx(131 / 169)]
    assert falls["end_seeds"] == [] and falls["complete"] == [] and falls["kept"] == 12
    assert np.isnan(falls["stages_run"])  # no stages run given
    early = diagnosis_page.later_seeds(llc.iloc[:1], runs)
    assert np.isnan(early.loc[0, "ratio"]) and diagnosis_page.fall_values(early)["seeds"] == []


def test_seed_llc_points_keep_the_other_float32_seeds_with_both_points_at_the_stages_budget():
    budget, other = diagnosis.budget_label(ICL_LLC_REDUCED), "2 chains x 5000 draws"
    rows = [(0, "float32", budget, diagnosis.STEP_40K, 169.3), (0, "float32", budget, diagnosis.END_STEP, 112.0),
            (0, "float32", other, diagnosis.END_STEP, 150.0),  # another budget: not read
            (1, "float32", budget, diagnosis.STEP_40K, 162.5), (1, "float32", budget, diagnosis.END_STEP, 160.0),
            (2, "float32", budget, diagnosis.STEP_40K, 169.0),  # no end yet: left out
            (3, "bfloat16", budget, diagnosis.STEP_40K, 170.0), (3, "bfloat16", budget, diagnosis.END_STEP, 120.0)]
    llc = pd.DataFrame(rows, columns=["seed", "operands", "budget", "step", "llc_mean"])
    assert diagnosis.seed_llc_points(llc) == {0: (169.3, 112.0, diagnosis.STEP_40K)}
    assert diagnosis.seed_llc_points(pd.DataFrame()) == {}
    # the stages run's rule: chains 4x longer replace the reduced budget where they differ by 5% or more, only there
    longer = diagnosis.budget_label(diagnosis.LLC_LONGER)
    checked = pd.concat([llc, pd.DataFrame([(0, "float32", longer, diagnosis.END_STEP, 120.0),
                                            (0, "float32", longer, diagnosis.STEP_40K, 170.0)],
                                           columns=llc.columns)], ignore_index=True)
    assert diagnosis.seed_llc_points(checked) == {0: (169.3, 120.0, diagnosis.STEP_40K)}


def test_the_fall_by_the_authors_estimator_is_read_at_every_float32_seed_with_both_rows():
    as_run, reduced = diagnosis.budget_label(diagnosis.LLC_AS_RUN), diagnosis.budget_label(ICL_LLC_REDUCED)
    rows = [(0, "float32", as_run, diagnosis.STEP_40K, 169.2), (0, "float32", as_run, diagnosis.END_STEP, 119.8),
            (1, "float32", as_run, diagnosis.STEP_40K, 164.2), (1, "float32", as_run, diagnosis.END_STEP, 162.3),
            (2, "float32", as_run, diagnosis.STEP_40K, 168.5),  # no end yet: left out
            (3, "float32", reduced, diagnosis.STEP_40K, 170.0), (3, "float32", reduced, diagnosis.END_STEP, 120.0),
            (4, "bfloat16", as_run, diagnosis.STEP_40K, 170.0), (4, "bfloat16", as_run, diagnosis.END_STEP, 120.0)]
    llc = pd.DataFrame(rows, columns=["seed", "operands", "budget", "step", "llc_mean"])
    assert diagnosis.as_run_falls(llc) == pytest.approx({0: 119.8 / 169.2, 1: 162.3 / 164.2})
    assert diagnosis.as_run_falls(pd.DataFrame()) == {}


def test_the_seed_table_puts_every_seed_at_the_reduced_budget_beside_the_papers_seeds(monkeypatch):
    from plateau_lib.icl import diagnosis_page, long_run
    budget = diagnosis.budget_label(ICL_LLC_REDUCED)
    llc = pd.DataFrame([{"seed": 0, "operands": "float32", "budget": budget, "step": s, "llc_mean": v}
                        for s, v in ((40_292, 169.31), (318_181, 105.24))]
                       + [{"seed": 0, "operands": "bfloat16", "budget": budget, "step": 40_292, "llc_mean": 1.0},
                          {"seed": 0, "operands": "float32", "budget": diagnosis.budget_label(diagnosis.LLC_LONGER),
                           "step": 318_181, "llc_mean": 115.04},
                          # the retrain's kept checkpoints: read where the stages run has no λ̂, never in its place
                          {"seed": 1, "operands": "float32", "budget": budget, "step": 398_989, "llc_mean": 150.04},
                          {"seed": 1, "operands": "float32", "budget": budget, "step": 318_181, "llc_mean": 1.0}])
    monkeypatch.setattr(long_run, "llc_table", lambda cfg, llc: pd.DataFrame({"step": [318_181.0], "llc_mean": [139.2]}))
    monkeypatch.setattr(long_run, "budget_table", lambda cfg, llc: pd.DataFrame({"step": [318_181], "longer": [154.0]}))
    table = diagnosis_page.seed_llc_table(llc).set_index("step (the paper's)")
    late = table.loc["318,181 (320k)"]
    assert (late["seed 0"], late["seed 1"], late["seed 1, chains 4× longer"]) == ("105.2", "139.2", "154.0")
    assert (late["paper: seed 1"], late["paper: seeds 0–4"]) == ("112.8", "113–131")
    assert late["seed 0, chains 4× longer"] == "115.0" and table.loc["40,292 (40k)", "seed 0, chains 4× longer"] == "–"
    assert table.loc["40,292 (40k)", "seed 0"] == "169.3"  # float32 only: the bfloat16 row is not read
    assert table.loc["202,019 (200k)", "paper: seed 1"] == "–"  # the reference logs no 200k value
    assert table.loc["398,989 (400k)", "seed 1"] == "150.0" and table.loc["398,989 (400k)", "seed 0"] == "–"
    # one row per step with the paper's seed range, each at the kept checkpoint within 5% of it
    assert list(table.index) == ["984 (1k)", "5,050 (5k)", "10,100 (10k)", "20,201 (20k)", "40,292 (40k)",
                                 "80,807 (80k)", "126,262 (126k)", "202,019 (200k)", "318,181 (320k)",
                                 "398,989 (400k)", "499,999 (500k)"]
    assert not table.isna().any().any()


def test_the_longer_budget_is_the_stages_runs_check_and_keeps_rows_of_its_own():
    from plateau_lib.icl import long_run
    assert diagnosis.LLC_LONGER == ICL_LLC_REDUCED.replace(num_draws=long_run.CHECK_FACTOR * ICL_LLC_REDUCED.num_draws)
    assert diagnosis.budget_label(diagnosis.LLC_LONGER) != diagnosis.budget_label(ICL_LLC_REDUCED)


def test_seed_stages_runs_the_pages_rule_on_each_seed_and_on_the_papers_own_values_at_the_same_steps(monkeypatch):
    """Seed 0 at the steps where the paper gives its seeds' range, with the middle of that range as its λ̂ (so its
    row must equal the control's), seed 2 missing one step (left out), seed 1 from the stages run."""
    import types
    from plateau_lib.icl import development, diagnosis_page, long_run
    budget, points = diagnosis.budget_label(ICL_LLC_REDUCED), diagnosis_page.paper_points()
    middle = [sum(development.PAPER_LLC_SEEDS[p]) / 2 for p in points.values()]
    llc = pd.DataFrame([{"seed": 0, "operands": "float32", "budget": budget, "step": s, "llc_mean": v}
                        for s, v in zip(points, middle)]
                       + [{"seed": 2, "operands": "float32", "budget": budget, "step": s, "llc_mean": v}
                          for s, v in list(zip(points, middle))[1:]])
    monkeypatch.setattr(long_run, "llc_table", lambda cfg, llc: pd.DataFrame())
    whole = pd.DataFrame({"step": list(points), "llc_mean": middle})
    run = development.Development(types.SimpleNamespace(config={"steps": 500_000}), whole, pd.DataFrame(), {})
    table = diagnosis_page.seed_stages(llc, run)
    grid = "11, at the paper's steps"
    assert list(table.index) == [("seed 0", grid), (diagnosis_page.PAPER_MIDDLE, grid),
                                 ("seed 1", "all 11 of the stages run")]
    assert (table.iloc[0] == table.loc[(diagnosis_page.PAPER_MIDDLE, grid)]).all()
    assert table.loc[(diagnosis_page.PAPER_MIDDLE, grid), "λ̂ highest at"] == "40,292"  # the paper's 40k peak
    assert diagnosis_page.seed_stages(llc, None).empty
    found = diagnosis_page.seed_stages_values(table)
    assert (found["same"], found["other"], found["highest"]) == (["seed 0"], [], "40,292")
    control = table.loc[(diagnosis_page.PAPER_MIDDLE, grid)]
    assert found["stages"] == control["stages"] and found["boundaries"] == control["boundaries found"]


def markers_table(rows, column="loss"):
    """A diagnosis markers table from (seed, operands, data, step, value) rows, the value in ``column``."""
    return pd.DataFrame(rows, columns=["seed", "operands", "data", "step", column])


def test_seed_values_put_seed_1_and_its_retrain_beside_the_other_seeds_at_40k():
    from plateau_lib.icl import diagnosis_page
    step = diagnosis.STEP_40K
    markers = markers_table([(0, "float32", "GPU", step, 1.89), (2, "float32", "GPU", step, 1.90),
                             (1, "float32", "GPU", step, 1.98), (1, "float32", "CPU", step, 1.995),
                             (0, "bfloat16", "GPU", step, 1.5)])
    markers["delta_ridge"], markers["n"] = markers["loss"] - 1.6, 8192
    values = diagnosis_page.seed_values(markers, [(diagnosis.variant(0), "cuda")])
    assert values["other_seeds"] == [0, 2] and values["others_loss"] == [1.89, 1.90]  # float32 only
    assert (values["seed1_loss"], values["retrain_loss"]) == (1.98, 1.995)
    assert values["retrain_delta"] == pytest.approx(0.395) and values["others_delta"] == [
        pytest.approx(0.29), pytest.approx(0.30)]
    assert (values["paper_loss"], values["paper_delta"], values["held_out"]) == (1.90, 0.239, 8192)
    assert values["gpu_runs"] == 1


def test_the_precision_values_read_seed_1s_float32_and_bfloat16_lambda_beside_the_other_seeds():
    from plateau_lib.icl import diagnosis_page
    step = diagnosis_page.STEP_126K
    markers = markers_table([(0, "float32", "GPU", step, 2.0), (1, "float32", "GPU", step, 2.5),
                             (2, "float32", "GPU", step, 2.2), (1, "bfloat16", "GPU", step, 2.47)])
    markers["delta_ridge"] = markers["loss"] / 10
    budget = diagnosis.budget_label(ICL_LLC_REDUCED)
    row = dict(step=step, budget=budget, data="GPU")
    llc = pd.DataFrame([{**row, "seed": 1, "operands": "float32", "llc_mean": 150.0},
                        {**row, "seed": 0, "operands": "float32", "llc_mean": 152.4},
                        {**row, "seed": 2, "operands": "float32", "llc_mean": 154.5}])
    assert np.isnan(diagnosis_page.precision_values(markers, llc)["llc_bfloat16"])  # no bfloat16 row
    llc.loc[len(llc)] = {**row, "seed": 1, "operands": "bfloat16", "llc_mean": 151.25}
    values = diagnosis_page.precision_values(markers, llc)
    assert (values["llc_float32"], values["llc_bfloat16"], values["llc_others"]) == (150.0, 151.25, [152.4, 154.5])
    sd = pd.Series([2.0, 2.5, 2.2]).std()
    assert values["pairs"] == 1 and values["last_step"] == step and values["llc_step"] == step
    assert values["loss_gap"] == pytest.approx(0.03) and values["loss_share"] == pytest.approx(0.03 / sd)
    assert values["delta_gap"] == pytest.approx(0.003) and values["delta_share"] == pytest.approx(0.03 / sd)


def test_ood_and_layer_norm_values_read_seed_1s_retrain_and_the_other_seeds():
    from plateau_lib.icl import diagnosis_page
    early, late = diagnosis_page.STEP_40K, diagnosis_page.LATE_STEP
    markers = markers_table([(1, "float32", "CPU", early, 80.0), (1, "float32", "CPU", late, 76.0),
                             (0, "float32", "GPU", early, 72.0), (2, "float32", "GPU", early, 74.0),
                             (1, "float32", "GPU", early, 81.0), (0, "float32", "GPU", late, 84.0),
                             (3, "float32", "GPU", late, 76.5), (0, "bfloat16", "GPU", late, 99.0)],
                            diagnosis_page.OOD)
    markers["loss_ood_inputs"] = markers[diagnosis_page.OOD] - 0.25
    ood = diagnosis_page.ood_values(markers)
    assert (ood["seed1"], ood["seed1_late"], ood["others"], ood["gap"]) == (80.0, 76.0, [72.0, 74.0], 0.25)
    assert (ood["others_late"], ood["late_seeds"]) == ([84.0, 76.5], [0, 3])  # float32 only, seed 1 left out
    assert (ood["paper"], ood["paper_late"]) == (72.2, 84.8)
    for i, key in enumerate(diagnosis.LAYER_NORMS):
        markers[key] = markers["step"].map({early: 1.0 + i, late: 0.1 * i})
    norms = diagnosis_page.layer_norm_values(markers)
    assert list(norms.index) == list(diagnosis.LAYER_NORMS)
    assert list(norms.columns) == [early, diagnosis_page.STEP_126K, late]
    assert norms.loc["ln_attn_1", early] == 2.0 and norms.loc["ln_attn_1", late] == pytest.approx(0.1)
    assert norms[diagnosis_page.STEP_126K].isna().all()  # no row at 126k: missing, not a sentence


def test_settling_reads_the_last_draws_against_the_window_at_each_seed(monkeypatch):
    """Seed 0 with rows at both LR4 steps and its longer chains at 318,181 only; seed 2 without 202,019: left out."""
    from plateau_lib.icl import diagnosis_page
    lr4, late = diagnosis_page.LR4_STEP, diagnosis_page.LATE_STEP

    def last_draws(cfg, stream, llc=ICL_LLC_REDUCED, draws=200):
        longer = llc == diagnosis.LLC_LONGER
        steps = [late] if longer else ([lr4, late] if cfg.seed == 0 else [late])
        return pd.DataFrame({"step": steps, "window": [100.0 + longer * 10 + s / 1e6 for s in steps],
                             "last draws": [120.0 + longer * 10 + draws / 100 for _ in steps]})
    monkeypatch.setattr(diagnosis, "last_draws", last_draws)
    table = diagnosis_page.settling([2, 0])
    assert table.index.tolist() == [0]
    assert table.loc[0, (f"{lr4:,}", "last 200 draws")] == 122.0
    assert table.loc[0, (f"{late:,}", "window")] == pytest.approx(100 + late / 1e6)
    assert table.loc[0, (f"{late:,}", "their last 800 draws")] == 138.0
    assert np.isnan(table.loc[0, (f"{diagnosis.END_STEP:,}", "chains 4× longer")])
    values = diagnosis_page.settling_values(table)
    assert values["seeds"] == [0] and values["last_lr4"] == [122.0] and values["longer_late"] == [
        pytest.approx(110 + late / 1e6)]


def test_estimator_values_give_each_readings_fall_from_40k_to_320k(monkeypatch):
    from plateau_lib.icl import diagnosis_page
    windows = pd.DataFrame({"step": [diagnosis_page.STEP_40K, diagnosis_page.LATE_STEP],
                            "authors' window": [160.0, 120.0], "stages page's window": [160.0, 80.0],
                            "after 1,000 steps": [150.0, 150.0]})
    monkeypatch.setattr(diagnosis, "estimator_windows", lambda cfg: windows)
    table, falls = diagnosis_page.estimator_values()
    assert table.index.tolist() == [diagnosis_page.STEP_40K, diagnosis_page.LATE_STEP]
    assert (falls["all"], falls["window"], falls["after"]) == (0.75, 0.5, 1.0)
    assert falls["paper"] == pytest.approx(112.8 / 169.3, abs=1e-3)  # the paper's seed 1, 320k over 40k


def test_saving_a_state_keeps_the_note_on_how_earlier_stretches_ran(tmp_path):
    """A GPU session's note ("trained on a lent H100 …") survives the CPU's later saves of the same run."""
    import json
    dst, run_dir = tmp_path / "state", tmp_path / "run"
    dst.mkdir(), run_dir.mkdir()
    (dst / "progress.json").write_text(json.dumps({"status": "in progress", "note": "trained on a lent H100"}))
    record = diagnosis.save(diagnosis.variant(3), run_dir, None, dst)
    assert record["note"] == "trained on a lent H100"
    assert json.loads((dst / "progress.json").read_text())["note"] == "trained on a lent H100"


def test_the_authors_estimator_table_gives_each_seeds_value_spread_and_fall():
    import pandas as pd
    from plateau_lib.icl import diagnosis, diagnosis_page
    as_run, reduced = diagnosis.budget_label(diagnosis.LLC_AS_RUN), diagnosis.budget_label(diagnosis.ICL_LLC_REDUCED)
    llc = pd.DataFrame({"seed": [0, 0, 3, 3], "operands": "float32", "step": [40_292, 499_999, 40_292, 499_999],
                        "llc_mean": [170.0, 120.0, 168.0, 150.0], "llc_std": [1.0, 2.0, 0.5, 0.5],
                        "budget": [as_run, as_run, as_run, reduced]})
    table = diagnosis_page.authors_estimator_table(llc).set_index("step (the paper's)")
    assert table.loc["40,292 (40k)", ["seed 0", "seed 3"]].tolist() == ["170.0 ± 1.0", "168.0 ± 0.5"]
    assert table.loc["end ÷ 40k", ["seed 0", "seed 3", "paper: seeds 0–4"]].tolist() == ["0.71", "–", "0.68–0.83"]
    assert diagnosis_page.authors_estimator_table(llc.iloc[3:]).empty


def test_the_calibration_grid_holds_the_papers_setting_at_a_kept_checkpoint():
    from plateau_lib.icl.presets import ICL_LLC_PAPER
    grid = diagnosis.STAGES_CALIBRATION
    assert grid["step"] in diagnosis.KEPT_STEPS
    cells = diagnosis.calibration_cells()
    assert len(cells) == len(set(cells)) == 10
    assert (ICL_LLC_PAPER.epsilon, ICL_LLC_PAPER.nbeta, ICL_LLC_PAPER.gamma) in cells
    # the calibration draws from the stages page's data set, at the paper's batch and seed
    sgld = diagnosis.CALIBRATION_SGLD
    assert (sgld.batch_size, sgld.n_data, sgld.seed) == (1024, 2**18, 0) and sgld.num_burnin_steps == 0
