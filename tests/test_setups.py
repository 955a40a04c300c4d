"""The training-setups page (Figs. 26-40): the schedule's factor, each setup's changed fields, Muon's parameter
groups, the page's numbers on hand-built tables, and bad input."""
import math

import numpy as np
import pandas as pd
import pytest
import torch

from plateau_lib.book import pages
from plateau_lib.engine import presets as engine_presets, stages
from plateau_lib.engine.runs import TrainConfig
from plateau_lib.engine.setup import build_model, lr_factor, make_optimizers, muon_groups
from plateau_lib.engine.train import train
from plateau_lib.plateau import presets, setups

TINY = dict(d_model=16, steps=4, eval_every=2, batch_size=8, eval_batch=8)


def test_warmup_cosine_factor_on_hand_computed_steps():
    cfg = TrainConfig(schedule="warmup_cosine", warmup_steps=200, steps=400)
    # linear 0 -> 1 over the warm-up (0 at step 0), then 0.5 (1 + cos(pi t)) with t the fraction of the decay
    expected = {0: 0.0, 50: 0.25, 100: 0.5, 200: 1.0, 300: 0.5, 350: 0.5 * (1 + math.cos(math.pi * 0.75)), 400: 0.0}
    for step, factor in expected.items():
        assert lr_factor(cfg, step) == pytest.approx(factor, abs=1e-12), step


@pytest.mark.parametrize("preset", engine_presets.PRESETS)
def test_schedule_setup_warms_up_over_half_the_run(preset):
    (cfg,) = presets.training_setup_runs(preset, setups=["warm-up + cosine"], seeds=[0]).values()
    assert cfg.schedule == "warmup_cosine" and cfg.warmup_steps * 2 == cfg.steps
    assert lr_factor(cfg, 0) == 0 and lr_factor(cfg, cfg.warmup_steps) == 1
    assert lr_factor(cfg, cfg.steps) == pytest.approx(0, abs=1e-12)


@pytest.mark.parametrize("preset", engine_presets.PRESETS)
def test_each_setup_changes_exactly_its_listed_fields(preset):
    base = presets.mws_config(preset).to_dict()
    runs = presets.training_setup_runs(preset)
    for (name, seed), cfg in runs.items():
        listed = presets.TRAINING_SETUPS[preset][name][1]
        ours = cfg.to_dict()
        changed = {k for k in ours if k != "seed" and ours[k] != base[k]}
        assert changed == set(listed), name
        assert all(ours[k] == v for k, v in listed.items()), name
    seeds = {name: sorted(s for n, s in runs if n == name) for name, _ in runs}
    assert seeds["baseline"] == [0, 1, 2]
    assert seeds["Muon"] == ([0] if preset == "cpu" else [0, 1, 2])


def test_paper_setups_keep_the_papers_step_budgets():
    runs = presets.training_setup_runs("paper", seeds=[0])
    assert runs[("baseline", 0)] == presets.MWS_PAPER
    assert runs[("softmax", 0)].steps == 2000 and runs[("softmax", 0)].softmax
    assert runs[("Muon", 0)].steps == 100_000 and runs[("Muon", 0)].muon_lr == 0.02 and runs[("Muon", 0)].lr == 1e-4
    assert runs[("SGD", 0)].optimizer == "sgd" and runs[("SGD", 0)].momentum == 0


def test_muon_groups_as_documented():
    model = build_model(TrainConfig(**TINY, optimizer="muon"), "cpu")
    matrices, others = muon_groups(model)
    assert matrices == [f"blocks.0.{m}.weight" for m in ("attn.Q", "attn.K", "attn.V", "attn.c_proj", "mlp.c_fc",
                                                          "mlp.c_proj")]
    assert {"wte.weight", "wpe.weight", "lm_head.weight", "ln_f.weight", "ln_f.bias", "blocks.0.attn.Q.bias"} <= set(
        others)
    assert sorted(matrices + others) == sorted(n for n, _ in model.named_parameters())
    muon, adam = make_optimizers(TrainConfig(**TINY, optimizer="muon", muon_lr=0.05, lr=3e-4), model)
    named = dict(model.named_parameters())
    assert isinstance(muon, torch.optim.Muon) and muon.param_groups[0]["lr"] == 0.05
    assert [id(p) for p in muon.param_groups[0]["params"]] == [id(named[n]) for n in matrices]
    assert isinstance(adam, torch.optim.Adam) and adam.param_groups[0]["lr"] == 3e-4


def test_muon_groups_leave_out_frozen_parameters():
    model = build_model(TrainConfig(**TINY), "cpu")
    model.blocks[0].attn.Q.weight.requires_grad_(False)
    model.ln_f.weight.requires_grad_(False)
    matrices, others = muon_groups(model)
    assert "blocks.0.attn.Q.weight" not in matrices and "ln_f.weight" not in others


def _table(rows, flat=stages.PLATEAU_MIN_EVALUATIONS):
    """Hand-built milestones; each run's loss sits still for ``flat`` evaluations after y₁ (a plateau by default)."""
    return pd.DataFrame(rows, columns=["setup", "family", "seed", "partial_step", "jump_step", "plateau_span",
                                       "peak_cosine", "peak_rho"]).assign(plateau_evaluations=flat)


def test_a_run_that_learns_y1_first_but_whose_loss_keeps_falling_has_no_plateau():
    """SGD with momentum at the paper's width learns y₁ at step 100 and jumps at 150 with its loss falling all the
    way: y₁ first, and no plateau (``stages.plateau_evaluations`` 1)."""
    table = pd.concat([_table([("baseline", "baseline", 0, 30, 190, 160, 0.96, 0.81)]),
                       _table([("SGD, momentum 0.9", "optimizer", 0, 100, 150, 50, 0.99, 0.9)], flat=1)],
                      ignore_index=True)
    assert setups.plateaued(table).tolist() == [True, False]
    assert setups.setup_values(table)["runs that learn y₁ first, then plateau (fraction)"] == 0.5
    assert setups.unplateaued_runs(table) == "SGD, momentum 0.9 (seed 0)"


def test_setup_values_on_a_hand_built_table():
    table = _table([("baseline", "baseline", 0, 80, 220, 140, 0.99, 0.9),
                    ("baseline", "baseline", 1, 90, 300, 210, 0.97, 0.4),
                    ("softmax", "softmax attention", 0, 100, 780, 680, 0.8, 0.6),
                    ("SGD", "optimizer", 0, None, None, None, 1.0, 0.75),
                    ("lr 5e-4", "learning rate", 0, 120, None, None, 0.99, 0.95),
                    ("n 8", "sequence length n", 0, 40, 40, 0, 0.9, 0.55)])
    assert setups.plateaued(table).tolist() == [True, True, True, False, True, False]
    values = setups.setup_values(table)
    assert values["runs that learn y₁ first, then plateau (fraction)"] == pytest.approx(4 / 6)
    assert values["runs that jump within their run (fraction)"] == pytest.approx(4 / 6)
    # n 8 learns everything at once (0.9 would not count either way); softmax's 0.8 is the lowest plateau's
    assert values["lowest peak cosine over the runs that plateau"] == pytest.approx(0.8)
    # each run, not a setup's mean: baseline's seeds 0.9 and 0.4 would hide the 0.4 in a mean of 0.65
    assert values["lowest peak ρ over the runs that plateau"] == pytest.approx(0.4)
    # seed by seed: softmax's seed 0 against the baseline's seed 0 (seed 1 has no softmax run)
    assert values["softmax jump step ÷ linear baseline's"].values == pytest.approx({0: 780 / 220})
    assert "softmax jump step ÷ linear baseline's" not in setups.setup_values(table[table.setup != "softmax"])
    closing = setups.per_setup(table)
    assert closing.loc["baseline", "plateau span (steps)"] == "{}–{}".format(*sorted(
        table.loc[table.setup == "baseline", "plateau_span"].astype(int)))        # the seeds' range, not their mean
    assert closing.loc["SGD", "plateau span (steps)"] == "–"
    assert closing.loc["baseline", "seeds"] == 2 and closing.loc["baseline", "peak ρ"] == "0.40–0.90"


def test_changed_fields_lists_each_setup_once():
    base = TrainConfig(**TINY)
    configs = {("baseline", 0): base, ("baseline", 1): base.replace(seed=1),
               ("sgd", 0): base.replace(optimizer="sgd", lr=0.3)}
    shown = setups.changed_fields(configs, base)
    assert shown.loc["baseline", "changes"] == "none (the MWS config)"
    assert shown.loc["sgd", "changes"] == "optimizer = sgd; lr = 0.3"


def test_bad_input_raises_before_compute():
    with pytest.raises(ValueError, match="setups"):
        presets.training_setup_runs("cpu", setups=["Lion"])
    with pytest.raises(ValueError, match="setups"):
        presets.training_setup_runs("cpu", setups=[])
    with pytest.raises(ValueError, match="preset"):
        presets.training_setup_runs("gpu")
    with pytest.raises(ValueError, match="seed"):
        presets.training_setup_runs("cpu", overrides={"seed": 3})
    with pytest.raises(ValueError, match="stepz"):
        presets.training_setup_runs("cpu", overrides={"stepz": 3})


def test_muon_setup_trains_and_keeps_the_metrics():
    (cfg,) = presets.training_setup_runs("cpu", setups=["Muon"], overrides=TINY).values()
    out = train(cfg, progress=False)
    assert list(out.metrics["step"]) == [0, 2, 4] and np.isfinite(out.metrics["loss"]).all()


def test_the_weakest_runs_are_the_ones_the_verdicts_judge():
    table = _table([("baseline", "baseline", 0, 80, 220, 140, 0.99, 0.9), ("baseline", "baseline", 1, 90, 300, 210, 0.97, 0.4),
                    ("SGD", "optimizer", 2, None, None, None, 0.6, 0.75)])
    weakest = setups.weakest_runs(table)
    # SGD's seed 2 never learns y₁: its 0.6 is no collapse that failed, so it is left out (it set the old minimum)
    assert weakest.loc["peak cosine"].tolist() == ["baseline", 1, 0.97] and weakest.loc["peak ρ"].tolist() == ["baseline", 1, 0.4]
    values = setups.setup_values(table)
    assert values["lowest peak cosine over the runs that plateau"] == weakest.loc["peak cosine", "value"] == 0.97
    assert setups.unplateaued_runs(table) == "SGD (seed 2)"
    assert setups.unplateaued_runs(table[setups.plateaued(table)]) == "none"


def test_a_run_without_a_plateau_is_not_judged_for_collapse():
    """n = 8's seed 1 learns y₁ at step 110 and jumps at step 90: it has no plateau, so its low peak cosine (0.73,
    the paper preset's case) is not a collapse that failed; the lowest is over the runs that plateau."""
    table = _table([("baseline", "baseline", 0, 30, 190, 160, 0.96, 0.81), ("n 8", "sequence length n", 0, 20, 60, 40, 0.75, 0.59),
                    ("n 8", "sequence length n", 1, 110, 90, -20, 0.73, 0.30)])
    values = setups.setup_values(table)
    assert values["lowest peak cosine over the runs that plateau"] == pytest.approx(0.75)
    assert values["lowest peak ρ over the runs that plateau"] == pytest.approx(0.59)
    assert setups.weakest_runs(table).loc["peak cosine"].tolist() == ["n 8", 0, 0.75]
    assert setups.unplateaued_runs(table) == "n 8 (seed 1)"


def test_a_table_where_no_run_learned_y1_gives_nothing_to_judge():
    """A tiny run that learns nothing yet (the book's smoke build): the verdicts are 'not reached', the page's
    numbers are dashes, and nothing raises."""
    table = _table([("baseline", "baseline", 0, None, None, None, 0.99, 0.9), ("SGD", "optimizer", 0, None, None, None, 0.6, 0.75)])
    values = setups.setup_values(table)
    assert np.isnan(values["lowest peak cosine over the runs that plateau"])
    weakest = setups.weakest_runs(table)
    assert weakest["setup"].tolist() == [pages.MISSING] * 2 and weakest["value"].isna().all()
    assert setups.lowest_setups(table[setups.plateaued(table)], "peak_rho").empty


def test_per_setup_spans_read_as_ranges_with_minus_signs_and_a_dash_when_a_seed_never_jumped():
    table = _table([("n 8", "sequence length n", 0, 60, 40, -20, 0.9, 0.5), ("n 8", "sequence length n", 1, 0, 40, 40, 0.9, 0.5),
                    ("base", "baseline", 0, 80, 210, 130, 0.99, 0.9), ("base", "baseline", 1, 90, 250, 160, 0.97, 0.4),
                    ("lr", "learning rate", 0, 80, 160, 80, 0.9, 0.9),
                    ("SGD", "optimizer", 0, 80, 160, 80, 0.9, 0.9), ("SGD", "optimizer", 1, 80, None, None, 0.9, 0.9)])
    spans = setups.per_setup(table)["plateau span (steps)"]
    assert spans.to_dict() == {"SGD": "–", "base": "130–160", "lr": "80", "n 8": "−20 to 40"}


def test_the_verdicts_are_read_under_other_readings_of_a_plateau():
    """A baseline run that sits still for three evaluations after y₁ and a run whose loss falls 2.5% an evaluation:
    the second plateaus only when the tolerance allows 5%; the texts give each number's range and verdicts."""
    steps = list(range(0, 70, 10))
    still = pd.DataFrame({"step": steps, "loss_out": [2.9, 2.5, 2.5, 2.49, 2.49, 1.0, 0.5]})
    falling = pd.DataFrame({"step": steps, "loss_out": [2.9, 2.5, 2.4375, 2.377, 2.317, 1.0, 0.5]})
    metrics = pd.concat([still.assign(setup="baseline", seed=0), falling.assign(setup="n 8", seed=0)])
    table = _table([("baseline", "baseline", 0, 10, 50, 40, 0.95, 0.9), ("n 8", "sequence length n", 0, 10, 50, 40, 0.7, 0.2)])
    reading = setups.reading_sensitivity(metrics, table, tols=(0.02, 0.05), min_evaluations=(3,))
    share = "runs that learn y₁ first, then plateau (fraction)"
    assert reading[share].tolist() == [0.5, 1.0]
    assert reading["lowest peak cosine over the runs that plateau"].tolist() == [0.95, 0.7]
    from plateau_lib.plateau.claims import claims_of
    texts = setups.reading_texts(reading, claims_of(setups.FIGURE), "paper")
    assert texts["reading_0"] == "0.50–1.00 (not reproduced or reproduced)"
    assert texts["reading_tolerances"] == "2%–5%" and texts["reading_evaluations"] == "3"
