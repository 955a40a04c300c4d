"""The stages page's helpers (plateau_lib.icl.stages_page, stages_figures, stages_paper_run) on hand-built runs: no
training, no SGLD."""
import json
from types import SimpleNamespace

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

from plateau_lib.book import pages
from plateau_lib.engine import presets as engine_presets
from plateau_lib.icl import development, diagnosis, presets, stages_figures, stages_page, stages_paper_run
from plateau_lib.icl.claims import claims_of

K, D = 8, 4
PUBLISHED = [984, 35353, 45454, 126262, 323232]  # seed-1 candidates past step 100 (reference §6)


def fake_run(steps=500_000, llc=None, heads=(1, 2), cache=None):
    """A Development with hand-made tables: λ̂ at the paper's seed-1 points unless ``llc`` {step: λ̂}."""
    llc = llc or development.PAPER_LLC
    llc_table = pd.DataFrame({"step": list(llc), "llc_mean": list(llc.values()), "llc_se": 1.0})
    evals = np.array(sorted(llc))
    metrics = pd.DataFrame({"step": evals, "seed": 1, "loss": np.linspace(4.4, 1.75, evals.size),
                            "loss_ridge": 1.652, "delta_ridge": np.linspace(2.7, 0.09, evals.size),
                            "pred_sq": np.r_[0.2, 0.013, np.full(evals.size - 2, 1.5)],
                            "icl_score": np.linspace(0, -3.6, evals.size), "icl_1_D": 0.0, "icl_D_K": 0.0,
                            "loss_ood_inputs": 90.0, "loss_ood_tasks": 80.0,
                            "weight_norm": np.linspace(25, 236, evals.size)})
    positions = pd.DataFrame([{"step": s, "seed": 1, "token": k, "loss": 4.0 / k, "delta_ridge": 0.1}
                              for s in evals for k in range(1, K + 1)])
    L, H = heads
    attn = np.zeros((evals.size, L, H, 2 * K, 2 * K))
    attn[:, :, :, 0, 0] = 1.0
    attn[:, :, :, np.arange(1, 2 * K), np.arange(0, 2 * K - 1)] = 1.0  # previous-token heads
    rng = np.random.default_rng(0)
    arrays = {"step": evals, "attn": attn, "pred": rng.normal(size=(evals.size, 16, K)),
              "pred_ridge": rng.normal(size=(evals.size, 16, K)), "y": rng.normal(size=(evals.size, 16, K))}
    structure = pd.DataFrame({"step": evals, "weight_norm": 30.0, "ln blocks.0.ln_1": 1.0, "ln ln_f": 0.5,
                              **{f"token sv{i}": 2.0 / i for i in range(1, 6)},
                              **{f"position sv{i}": 1.0 / i for i in range(1, 6)}})
    train = SimpleNamespace(config={"steps": steps, "d_model": 64, "seed": 1, "task_kwargs": {"noise_var": 0.125}},
                            metrics=metrics, positions=positions, arrays=arrays, meta={})
    meta = {"device": "cpu", "train_wall_s": 12.5, "llc_wall_s": 30.0, "commit": "abc", "date": "2026-01-01",
            "cache": cache, "llc": {"num_chains": 3, "num_draws": 100, "batch_size": 128, "n_data": 4096}}
    return development.Development(train, llc_table, structure, meta)


def test_same_fraction_of_the_schedule():
    assert stages_page.from_paper_step(40_000, 2_000) == 160 and stages_page.to_paper_step(160, 2_000) == 40_000
    assert stages_page.from_paper_step(320_000, 20_000) == 12_800
    assert [stages_page.min_step(n) for n in (500_000, 20_000, 2_000)] == [100, 4, 0]
    assert stages_page.nearest_log([1, 100, 10_000], 900) == 100 and stages_page.nearest_log([], 5) is None


def paper_curve(steps=500_000, **changed):
    """The published seed-1 λ̂ at its marked points (``development.PAPER_LLC``), at the same fraction of a run of
    ``steps``; ``changed``: ``{"at_<paper step>": λ̂}`` replaced."""
    llc = {**development.PAPER_LLC, **{int(k[3:]): v for k, v in changed.items()}}
    return pd.DataFrame({"step": [round(s * steps / 500_000) for s in llc], "llc_mean": list(llc.values())})


def test_the_published_boundaries_match_themselves():
    table = stages_page.boundary_table(PUBLISHED[:1] + PUBLISHED[1:], 500_000, paper_curve())
    assert list(table["match"]) == ["yes", "yes", "yes", "yes", "extra"]
    assert list(table["found"][:4]) == [984, 35353, 126262, 323232] and table["found"].iloc[4] == 45454
    assert list(table["λ̂ before → after (found)"][:4]) == list(table["λ̂ before → after (paper)"][:4])
    assert table.loc[3, "λ̂ before → after (paper)"] == "falls → roughly flat"


def test_a_boundary_at_the_papers_step_but_inside_a_rise_does_not_match():
    """The paper's LR4 → LR5 ends a fall; at the same step, λ̂ that then climbs by 40% is another boundary."""
    table = stages_page.boundary_table(PUBLISHED, 500_000, paper_curve(at_500000=160.0))
    assert list(table["match"][:4]) == ["yes", "yes", "yes", "at the step, not the trend"]
    assert table.loc[3, "λ̂ before → after (found)"] == "falls → rises"
    # a peak that does not fall afterwards is not the LR2 -> LR3 boundary either
    flat = stages_page.boundary_table(PUBLISHED, 500_000, paper_curve(at_126000=168.0))
    assert flat.loc[1, "match"] == "at the step, not the trend" and flat.loc[1, "λ̂ before → after (found)"] == "rises → roughly flat"


def test_a_shorter_run_is_compared_at_the_same_fraction():
    # 1,600 of 20k is the paper's 40k: matched; 76 of 2,000 is the paper's 19k: nearest LR2 -> LR3 but off by > 2x
    table = stages_page.boundary_table([40, 1_600], 20_000, paper_curve(20_000))
    assert list(table["match"]) == ["yes", "yes", "none found near", "none found near"]
    mini = stages_page.boundary_table([76], 2_000, paper_curve(2_000))
    assert list(mini["match"]) == ["none found near", "no", "none found near", "none found near"]
    assert mini.loc[1, "same fraction of this run"] == 160
    assert (stages_page.boundary_table([], 2_000, paper_curve(2_000))["match"] == "none found near").all()


def test_llc_at_points_reads_the_nearest_checkpoint():
    points = stages_page.llc_at_points(fake_run())
    assert list(points["checkpoint"]) == [1_000, 40_000, 126_000, 320_000, 500_000]
    assert np.allclose(points["λ̂"], points["paper λ̂ (seed 1)"])
    short = stages_page.llc_at_points(fake_run(2_000, {0: 0.0, 4: 1.0, 150: 10.0, 500: 20.0, 1_300: 30.0, 2_000: 40.0}))
    assert list(short["checkpoint"]) == [4, 150, 500, 1_300, 2_000]
    assert list(short["same fraction of this run"]) == [4, 160, 504, 1280, 2000]


def test_stage_values_cover_every_claim_and_read_the_curves():
    run = fake_run()
    values = stages_page.stage_values(run, SimpleNamespace(boundaries=[984, 35353, 126262, 323232]))
    assert set(values) == {c.metric for c in claims_of(stages_page.FIGURE)}
    assert values["stages found"] == 5
    assert values["paper boundaries matched (at the same fraction of the schedule)"] == 4
    assert values["step of the λ̂ peak (× 500k ÷ steps)"] == 40_000
    assert values["λ̂ at 40k, the paper's peak (× steps ÷ 500k)"] == 169.3
    assert values["λ̂ at the end ÷ λ̂ at 40k"] == pytest.approx(116.3 / 169.3)
    assert values["minimum mean-square prediction (LR1 marker)"] == pytest.approx(0.013)
    assert values["final evaluation loss"] == pytest.approx(1.75)


def test_the_papers_own_numbers_are_reproduced_and_a_miniature_is_not_comparable():
    values = stages_page.stage_values(fake_run(), SimpleNamespace(boundaries=[984, 35353, 126262, 323232]))
    by_metric = {c.metric: c for c in claims_of(stages_page.FIGURE)}
    for metric, value in values.items():
        if metric != "final Δ to ridge":
            assert by_metric[metric].judge(value, "paper").split(";")[0] == "reproduced", metric
        expected = "reproduced" if metric.startswith("minimum mean-square") else "not comparable at this scale"
        assert by_metric[metric].judge(value, "cpu").split(";")[0] == expected, metric


def test_other_seeds_judge_the_llc_claims_seed_by_seed_and_leave_the_curve_claims_to_the_run():
    """Seed 1 (the run) at the paper's numbers, seed 0 whose λ̂ does not fall: the fall is partly, each seed shown."""
    values = stages_page.stage_values(fake_run(), SimpleNamespace(boundaries=[984, 35353, 126262, 323232]),
                                      {0: diagnosis.SeedPoints(170.0, 170.0, 80_807)})
    by_metric = {c.metric: c for c in claims_of(stages_page.FIGURE)}
    fall = by_metric["λ̂ at the end ÷ λ̂ at 40k"]
    assert fall.judge(values[fall.metric], "paper") == "partly"
    assert fall.show(values[fall.metric]) == "1.00 and 0.69 (seeds 0 and 1)"
    assert by_metric["λ̂ at 40k, the paper's peak (× steps ÷ 500k)"].judge(
        values["λ̂ at 40k, the paper's peak (× steps ÷ 500k)"], "paper") == "reproduced"
    # the peak's step too: seed 1 at 40k is reproduced, seed 0 at 80,807 only partly, so the claim is partly
    peak = by_metric["step of the λ̂ peak (× 500k ÷ steps)"]
    assert values[peak.metric].values == {1: 40_000, 0: 80_807} and peak.judge(values[peak.metric], "paper") == "partly"
    assert values["stages found"] == 5
    assert stages_page.provenance_summary(fake_run(), {0: diagnosis.SeedPoints(170.0, 170.0, 80_807)})[
        "λ̂ claims also at seeds"] == [0]
    # the authors' estimator replaces the stages budget at the seeds judged that have it to the end, only there
    authors = pd.Series({984: 19.0, 40_292: 170.0, 126_262: 157.0, 318_181: 120.0, 499_999: 119.0})
    values = stages_page.stage_values(fake_run(), SimpleNamespace(boundaries=[984, 35353, 126262, 323232]),
                                      {0: diagnosis.SeedPoints(170.0, 170.0, 80_807)},
                                      {0: authors, 7: authors * 0.1, 1: authors.drop(499_999) * 0.1})
    assert values[fall.metric].values == pytest.approx({1: 116.3 / 169.3, 0: 119.0 / 170.0})
    assert fall.judge(values[fall.metric], "paper") == "reproduced"
    at = {paper: values[metric].values for paper, metric in stages_page.MARKER_CLAIMS.items()}
    assert at == {1_000: {1: 18.6, 0: 19.0}, 40_000: {1: 169.3, 0: 170.0}, 126_000: {1: 156.9, 0: 157.0},
                  320_000: {1: 112.8, 0: 120.0}}
    assert all(by_metric[metric].judge(values[metric], "paper") == "reproduced"
               for metric in stages_page.MARKER_CLAIMS.values())


def test_verdict_table_records_each_preset_shown(tmp_path, monkeypatch):
    monkeypatch.setenv("PLATEAU_SUMMARIES", str(tmp_path))
    values = stages_page.stage_values(fake_run(), SimpleNamespace(boundaries=[984]))
    table = stages_page.verdict_table({"cpu": values, "cpu_long": values}, "icl_stages", {"cpu": {"device": "cpu"}})
    assert sorted(p.name for p in tmp_path.iterdir()) == ["hoogland-fig-1-b-lr-stages-cpu.json",
                                                           "hoogland-fig-1-b-lr-stages-cpu_long.json"]
    assert json.loads((tmp_path / "hoogland-fig-1-b-lr-stages-cpu.json").read_text())["page"] == "icl_stages"
    assert {"cpu miniature", "long CPU run", "verdict (cpu long)"} <= set(table.columns)
    assert list(table.columns)[-1] == "rule"
    assert table.loc["stages found", "verdict (cpu long)"] == "not comparable at this scale"


def test_checkpoint_counts_rebuild_the_presets():
    for preset, counts in presets.ICL_CHECKPOINTS.items():
        cfg = presets.ICL_STAGES[preset]
        assert engine_presets.log_linear_steps(cfg.steps, *counts) == tuple(cfg.checkpoint_steps), preset


def test_live_config_rebuilds_checkpoints_and_refuses_bad_values():
    cfg, llc = stages_page.live_config("cpu", steps=400, d_model=16, num_chains=2)
    assert cfg.steps == 400 and cfg.d_model == 16 and llc.num_chains == 2
    assert max(cfg.checkpoint_steps) <= 400 and cfg.checkpoint_steps == cfg.eval_steps and cfg.eval_every == round(100 * 400 / 1500)
    assert stages_page.live_config("cpu")[0] == presets.ICL_CPU
    with pytest.raises(ValueError, match="steps"):
        stages_page.live_config("cpu", steps=5)
    with pytest.raises(ValueError, match="preset"):
        stages_page.live_config("gpu")
    with pytest.raises(ValueError, match="SGLD"):
        stages_page.live_config("cpu", num_chainz=2)
    with pytest.raises(ValueError, match=r"checkpoint_steps must be integers in \[0, steps=1500\], got \[2000\]"):
        stages_page.live_config("cpu", overrides={"checkpoint_steps": (0, 100, 2_000)})  # a checkpoint outside the run


def test_settings_table_marks_the_miniatures_changes():
    table = stages_page.settings_table(*presets.icl_stages("cpu"))
    assert table.loc["training d_model", "changed"] == "≠" and table.loc["training lr", "changed"] == ""
    assert table.loc["SGLD num_chains", "this run"] == "3" and table.loc["SGLD num_chains", "paper"] == "10"


def test_layer_head_scores_find_previous_token_heads():
    heads = stages_page.layer_head_scores(fake_run().train)
    token = heads[heads["type"] == "previous token"]["weight"]
    assert np.allclose(token, 1.0) and set(heads["layer"]) == {"layer 1"}
    assert np.allclose(heads[heads["type"] == "previous y"]["weight"], 1.0)  # an x-query's previous token
    assert heads[heads["type"] == "previous x"]["weight"].max() == 0.0


def hand_built_heads(T=8):
    """Three evaluations of one layer of four heads: self, previous token from the second evaluation on,
    previous pair's x (lost at the second evaluation), and uniform attention."""
    attn = np.zeros((3, 1, 4, T, T))
    q = np.arange(T)
    attn[:, 0, 0, q, q] = 1.0
    attn[0, 0, 1] = np.tril(np.ones((T, T))) / np.arange(1, T + 1)[:, None]
    attn[1:, 0, 1, q[1:], q[1:] - 1] = 1.0
    attn[1:, 0, 1, 0, 0] = 1.0
    previous_x = np.where(q % 2 == 1, q - 3, q - 2).clip(0)
    attn[:, 0, 2, q, previous_x] = 1.0
    attn[1, 0, 2] = attn[0, 0, 1]
    attn[:, 0, 3] = attn[0, 0, 1]
    return attn


def test_head_types_name_each_head_half_as_the_paper():
    scores = development.head_scores(hand_built_heads())
    last = scores[scores["evaluation"] == 2].set_index(["head", "query"])
    assert last.loc[(0, "x"), "self"] == 1.0 and last.loc[(1, "y"), "previous token"] == 1.0
    assert np.isnan(last.loc[(1, "x"), "previous token"]) and last.loc[(1, "x"), "previous y"] == 1.0
    assert last.loc[(2, "y"), "previous x"] == 1.0 and last.loc[(2, "y"), "previous token"] == 0.0
    assert np.isclose(last.loc[(3, "y"), "self"], np.mean([1 / 4, 1 / 6, 1 / 8]))  # queries 3, 5, 7
    types = development.head_types(scores, steps=[0, 10, 100]).set_index("head")
    assert types.loc["B1H1x", "type"] == "self" and types.loc["B1H1x", "typed_from"] == 0
    assert types.loc["B1H2y", "type"] == "previous token" and types.loc["B1H2y", "typed_from"] == 10
    assert types.loc["B1H2x", "type"] == "previous y" and types.loc["B1H2x", "typed_from"] == 10
    assert types.loc["B1H3y", "type"] == "previous x" and types.loc["B1H3y", "typed_from"] == 100  # lost, regained
    assert not types.loc["B1H4y", "typed"] and pd.isna(types.loc["B1H4y", "typed_from"])
    with pytest.raises(ValueError, match="2 \\(x, y\\) pairs"):
        development.head_scores(np.zeros((1, 1, 1, 2, 2)))


def test_head_table_places_each_type_in_its_stage():
    run = fake_run(steps=100)
    run.train.arrays.update(step=np.array([0, 10, 100]), attn=hand_built_heads(2 * K))
    table = stages_page.head_table(run, SimpleNamespace(boundaries=[5, 50]))
    assert table.index[0] == "B1H1x" and table.loc["B1H2y", "λ̂ stage"] == "2" and table.loc["B1H3x", "λ̂ stage"] == "3"
    assert table.loc["B1H2y", "× 500k ÷ steps"] == "50,000" and table.loc["B1H4y", "type"] == "none (self)"


def test_frame_indices_span_the_run():
    steps = np.array([0, 1, 2, 5, 10, 50, 100, 500, 1000, 2000])
    picked = stages_page.frame_indices(steps, 4)
    assert picked[0] == 0 and picked[-1] == len(steps) - 1 and picked == sorted(set(picked))
    with pytest.raises(ValueError):
        stages_page.frame_indices([], 3)


def test_figures_draw_on_hand_built_runs():
    run = fake_run(heads=(2, 4))
    stages = SimpleNamespace(boundaries=[1_000, 40_000], steps=run.llc["step"].to_numpy(),
                             smooth=run.llc["llc_mean"].to_numpy())
    fig = stages_figures.stages_figure(run, stages, title="hand-built")
    assert len(fig.axes) == 2 + len(stages_figures.MARKERS) and fig.get_figwidth() == pytest.approx(7.5)
    frames = stages_figures.checkpoint_frames(run.train, n=3)
    assert list(frames)[0] == "step 0" and all(f.get_figwidth() == pytest.approx(7.5) for f in frames.values())
    plt.close("all")


def test_provenance_and_runs_table():
    runs = {"cpu": fake_run(2_000, {0: 0.0, 76: 5.0, 2_000: 90.0}), "paper": fake_run(cache="results/icl_stages-x")}
    rows = stages_page.provenance_rows(runs)
    assert len(rows) == 4 and rows[0]["source"] == "computed in this build"
    assert rows[2]["source"] == "results/icl_stages-x"
    assert stages_page.provenance_summary(runs["paper"])["source"] == "committed"
    assert stages_page.provenance_summary(runs["cpu"])["wall_time_s"] == 42.5
    found = {"cpu": SimpleNamespace(boundaries=[76], candidates=[76]),
             "paper": SimpleNamespace(boundaries=[984], candidates=[9, 984])}
    table = stages_page.runs_table(runs, found)
    assert list(table.index) == ["cpu miniature", "paper preset"]
    assert table.loc["cpu miniature", "boundaries"] == "76" and table.loc["paper preset", "candidates"] == "9 and 984"
    assert table.loc["cpu miniature", ["training (s)", "λ̂ (s)"]].tolist() == ["12", "30"]
    assert table.loc["paper preset", "λ̂ at 40k"].endswith("(step 40,000)")
    # a checkpoint too far from the same fraction of the schedule is shown and marked, as the claims skip it
    assert table.loc["cpu miniature", "λ̂ at 40k"] == "5.0 (step 76; not near 160, so not judged)"
    assert stages_page.near(76, 160) is False and stages_page.near(150, 160) is True
    # a 40-step run's "1k" falls at step 0.08: read as step 1, as a checkpoint at 0 is
    assert stages_page.near(0, 0.08) is True and stages_page.nearest_checkpoint([0, 4, 20], 0.08) == 0
    assert stages_page.richest(runs) == "paper"


def test_missing_runs_are_left_out(monkeypatch):
    monkeypatch.setattr(development, "load", lambda cfg, llc: None)
    monkeypatch.setattr(stages_page.long_run, "finished_run", lambda cfg, llc: None)
    assert stages_page.other_runs("cpu") == {}
    assert set(stages_paper_run.cpu_run(None).values()) == {pages.MISSING}
    assert set(stages_paper_run.findings(None, None).values()) == {pages.MISSING}


def test_the_live_run_in_numbers():
    fit = SimpleNamespace(fit_note="fitted kernel: x")
    live = stages_page.live_run(fake_run(2_000, {0: -2.0, 100: 5.0, 2_000: 9.0}), fit)
    assert live["live_negative_steps"] == "step 0" and live["live_fit"] == "fitted kernel: x"
    assert live["live_train_s"] == "12" and live["live_llc_s"] == "30"
    assert stages_page.live_run(fake_run(2_000, {0: 1.0, 100: 5.0, 2_000: 9.0}), fit)["live_negative_steps"] == "none"


def test_detect_stages_scales_the_first_step(monkeypatch):
    seen = {}
    monkeypatch.setattr(stages_page, "gp_stage_boundaries", lambda s, v, **kw: seen.update(kw))
    stages_page.detect_stages(fake_run(20_000, {0: 0.0, 10: 1.0, 100: 2.0, 1_000: 3.0, 20_000: 4.0}))
    assert seen == {"min_step": 4}


def test_paper_cost_reads_the_benchmark_record(tmp_path):
    from plateau_lib.book import benchmarks
    assert set(stages_page.paper_cost(tmp_path).values()) == {pages.MISSING}
    ratios = {"cpu_paper_training_500k_steps_extrapolated_s": 61_000.0,
              "cpu_paper_llc_one_checkpoint_extrapolated_s": 20_000.0,
              "cpu_paper_llc_190_checkpoints_extrapolated_s": 3_800_000.0}
    benchmarks.write_benchmark("icl", [{"workload": "w", "variant": "v"}], ratios, 1, folder=tmp_path)
    cost = stages_page.paper_cost(tmp_path)
    assert (cost["paper_cpu_train"], cost["paper_cpu_llc_one"], cost["paper_cpu_llc_all"]) == ("17 h", "6 h", "44 days")
    assert cost["paper_gpu_train"] == pages.MISSING                             # no GPU timed
    assert stages_page._duration(90) == "90 s" and stages_page._duration(600) == "10 min"


def test_the_paper_runs_findings_and_deviations_are_read_from_its_tables():
    """The paper's published seed-1 λ̂ as a hand-built run: its peak, its fall and the boundaries given are
    what the summary says; a run made on a CPU gives each deviation from the paper's SGLD settings."""
    run = fake_run()
    stages = SimpleNamespace(boundaries=[984, 40_000, 300_000], candidates=[984, 40_000, 300_000],
                             steps=np.array([984, 40_000, 126_000, 200_000, 300_000]),
                             slope=np.array([1.0, 0.5, -10.0, 12.0, 2.0]))   # a sign change the rule stepped over
    found = stages_paper_run.findings(run, stages)
    assert (found["paper_run_peak"], found["paper_run_peak_step"]) == ("169.3", "40,000")
    assert found["paper_run_near_from"] == found["paper_run_near_to"] == "40,000"  # one checkpoint near the peak
    assert (found["paper_run_low"], found["paper_run_low_step"], found["paper_run_low_share"]) == ("112.8", "320,000", "67%")
    assert found["paper_run_end"] == "116.3" and found["paper_run_stages"] == "4"
    assert (found["paper_run_matched"], found["paper_run_matched_steps"]) == ("3", "1k, 40k and 320k")
    assert found["paper_run_stepped_over"] == "step 126,000"                         # 40,000 is a boundary already
    assert stages_paper_run.paper_reference()["paper_llc_share"] == "67%"
    assert not stages_page.made_on_cpu(fake_run())
    assert set(stages_paper_run.cpu_run(run).values()) == {pages.MISSING}       # not made on a CPU
    run.meta.update(made_by="plateau_lib.icl.long_run", train_wall_s=18_000, llc_wall_s=36_000,
                    llc=presets.ICL_LLC_REDUCED.key_dict())
    made = stages_paper_run.cpu_run(run)
    assert (made["cpu_run_hours"], made["cpu_run_train_hours"], made["cpu_run_llc_hours"]) == ("15.0", "5.0", "10.0")
    assert (made["cpu_run_llc_rows"], made["cpu_run_checkpoints"]) == ("8", "190")
    assert (made["cpu_run_chains"], made["cpu_run_draws"], made["cpu_run_burnin"]) == ("4", "800", "200")
    assert made["cpu_run_n_data"] == "262,144" and stages_paper_run.paper_budget()["paper_sgld_n_data"] == "1,048,576"

def test_llc_is_judged_at_the_papers_moment_and_an_untrained_model_fails():
    """λ̂ is read at 40k (not at our own peak): a run that peaks at 80k with the paper's height is judged by its
    40k value. An untrained model's λ̂ (estimated here) and a λ̂ that never falls fail both claims."""
    from plateau_lib.icl.development import llc_data
    from plateau_lib.llc import SGLDConfig, estimate_llc
    llc = pd.DataFrame({"step": [984, 40_292, 80_807, 499_999], "llc_mean": [18.0, 150.0, 169.3, 160.0]})
    assert stages_page.llc_at_paper_step(llc, 40_000, 500_000) == 150.0
    assert np.isnan(stages_page.llc_at_paper_step(llc.iloc[[0, 2, 3]], 40_000, 500_000))  # nearest is 2x away
    by_metric = {c.metric: c for c in claims_of(stages_page.FIGURE)}
    at_40k, fall = by_metric["λ̂ at 40k, the paper's peak (× steps ÷ 500k)"], by_metric["λ̂ at the end ÷ λ̂ at 40k"]
    cfg = presets.ICL_PAPER.replace(device="cpu")
    task = cfg.make_task()
    torch.manual_seed(cfg.seed)  # the untrained weights of the paper's seed, whatever ran before in this process
    sgld = SGLDConfig(epsilon=3e-4, gamma=20 / 3, nbeta=200 / 3, num_chains=2, num_draws=40, batch_size=128, seed=0)
    untrained = estimate_llc(task.build_model(cfg), task.loss, llc_data(cfg, 2**10, 0, "cpu"), sgld)
    assert abs(untrained.llc_mean) < 20
    assert at_40k.judge(untrained.llc_mean, "paper") == "not reproduced"
    assert fall.judge(1.0, "paper") == "not reproduced"  # λ̂ that stays where it was at 40k
    assert at_40k.judge(162.5, "paper") == "partly" and at_40k.judge(170.0, "paper") == "reproduced"



def test_stages_are_found_on_each_sgld_budget():
    """A curve that mixes budgets and the same curve at one budget go through the same rule, each reported."""
    import numpy as np
    import pandas as pd
    from types import SimpleNamespace
    from plateau_lib.icl import stages_page
    steps = np.unique(np.geomspace(1, 500_000, 60).astype(int))
    ramp = 100 * np.tanh(np.log(steps + 1) / 6)
    dev = stages_page.development.Development(SimpleNamespace(config={"steps": 500_000}, metrics=None), None, None, {})
    curves = {"one": pd.DataFrame({"step": steps, "llc_mean": ramp}),
              "flat": pd.DataFrame({"step": steps, "llc_mean": np.full(steps.size, 3.0)})}
    table = stages_page.boundaries_by_budget(dev, curves)
    assert list(table["λ̂ curve"]) == ["one", "flat"]
    flat = table.set_index("λ̂ curve").loc["flat"]
    assert flat["boundaries found"] == "none" and flat["stages"] == 1 and flat["paper boundaries matched"] == 0


def test_tables_of_every_run_are_one_table_under_the_runs_labels():
    runs = {"cpu": fake_run(2_000), "paper": fake_run()}
    table = stages_page.by_run({p: stages_page.llc_at_points(d) for p, d in runs.items()}, runs)
    assert table.index.names == ["run", "paper point"]
    assert table.index.get_level_values("run").unique().tolist() == ["cpu miniature (2,000 steps)",
                                                                      "paper preset (500,000 steps)"]
    empty, texts = stages_page.budget_stages(fake_run())                        # not made on a CPU: nothing to show
    assert empty.empty and set(texts.values()) == {pages.MISSING}


def test_the_five_seeds_figure_draws_each_seed_both_ways_beside_the_papers_range():
    """Two panels (the whole run on a log axis, LR3-LR5 on a linear one), each with every seed's curve and the
    authors'-estimator points, the paper's range at each logged step, and one legend entry per seed."""
    from plateau_lib.icl import diagnosis_page, stages_figures
    curve = pd.Series({984: 19.0, 40_292: 169.0, 126_262: 155.0, 318_181: 105.0, 499_999: 108.0})
    fig = stages_figures.five_seeds_figure({0: curve, 2: curve * 0.99}, {0: curve + 10, 2: curve + 11})
    whole, late = fig.axes
    assert whole.get_xscale() == "log" and late.get_xscale() == "linear"
    for ax in (whole, late):
        assert len([line for line in ax.get_lines() if line.get_marker() == "o"]) == 2
        assert len(ax.collections) == 1 and len(ax.collections[0].get_segments()) == len(
            stages_figures.PAPER_LLC_SEEDS)
    assert {"seed 0", "seed 2", "the authors' estimator"} <= {t.get_text() for t in fig.legends[0].get_texts()}
    plt.close(fig)
    run = SimpleNamespace(llc=pd.DataFrame({"step": [1, 2, 3], "llc_mean": [1.0, np.nan, 3.0]}))
    assert diagnosis_page.seed_curves(pd.DataFrame(), run)[1].to_dict() == {1: 1.0, 3: 3.0}


def test_the_rule_runs_on_each_seeds_own_curve():
    """seed_stages: one row per seed, the rule on its own curve; a peak at 40k and a fall flattening near 320k on
    a sparse curve give those two boundaries, the first matching the paper's 40k."""
    steps = [984, 5_050, 10_100, 20_201, 40_292, 80_807, 126_262, 202_019, 252_524, 318_181, 398_989, 499_999]
    values = [19.0, 120.0, 151.0, 165.0, 169.0, 167.0, 152.0, 121.0, 108.0, 105.0, 104.5, 108.0]
    table = stages_page.seed_stages({0: pd.Series(values, index=steps), 3: pd.Series(values, index=steps) * 1.01})
    assert list(table.index) == [0, 3] and (table["checkpoints"] == 12).all()
    assert table.loc[0, "boundaries found"].startswith("40,292") and table.loc[0, "paper boundaries matched"] >= 1
    assert table.loc[0, "stages"] == len(table.loc[0, "boundaries found"].split(", ")) + 1


def test_the_marker_counts_read_each_seed_of_the_judged_values():
    """marker_counts counts the seeds inside the paper's range at each boundary from the values the verdicts judge
    (a BySeed per marker): a seed that never reached a marker is not counted, and a single number is one seed."""
    from plateau_lib.book.verdicts import BySeed
    metrics = list(stages_page.MARKER_CLAIMS.values())
    values = {metrics[0]: BySeed({0: 19.0, 1: 25.0, 2: float("nan")}), metrics[1]: 170.0,
              metrics[2]: BySeed({0: 157.0, 1: 156.5})}
    assert stages_page.marker_counts(values)["marker_counts"] == "1 of 2 at 1k, 1 of 1 at 40k, 2 of 2 at 126k and 0 of 0 at 320k"
