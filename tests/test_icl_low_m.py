"""The low-M mechanism tests against hand-built exact predictors with known answers."""
import math

import numpy as np
import pandas as pd
import pytest
import torch
import torch.nn as nn

from plateau_lib.icl import low_m, low_m_figures
from plateau_lib.icl.baselines import dmmse_predict, ridge_predict
from plateau_lib.icl.data import sample, task_set
from plateau_lib.icl.model import ICLConfig, ICLTransformer
from plateau_lib.icl.task import ICLRegression

N = 512  # sequences per test run: small and fast


class Exact(nn.Module):
    """A "model" that returns a fixed predictor f(xs, ys, tasks) (tasks kept as a buffer: it has a device)."""

    def __init__(self, fn, tasks):
        super().__init__()
        self.fn = fn
        self.register_buffer("tasks", tasks)

    def forward(self, xs, ys, return_internals=False):
        return self.fn(xs, ys, self.tasks)


def _task(M, **kw):
    return ICLRegression(D=4, K=8, noise_var=0.125, M=M, **kw)


def dmmse_model(task):
    return Exact(lambda xs, ys, t: dmmse_predict(xs, ys, t, task.noise_var), task.tasks())


def ridge_model(task):
    return Exact(lambda xs, ys, t: ridge_predict(xs, ys, task.noise_var), task.tasks())


def scaled_first_task_model(task, c):
    return Exact(lambda xs, ys, t: c * (xs @ t[0]), task.tasks())


def zero_model(task):
    return Exact(lambda xs, ys, t: torch.zeros_like(ys), task.tasks())


def task_mean_model(task):
    return Exact(lambda xs, ys, t: xs @ t.mean(0), task.tasks())


# --- the posterior --------------------------------------------------------------------------------

def test_posterior_reproduces_dmmse_on_random_inputs():
    tasks = task_set(5, 3, seed=2)
    xs, ys, _ = sample(64, 6, 3, 0.3, torch.Generator().manual_seed(0), tasks=tasks)
    w = low_m.posterior_weights(xs, ys, tasks, 0.3)
    assert w.shape == (64, 6, 5)
    torch.testing.assert_close(w.sum(-1), torch.ones(64, 6))
    torch.testing.assert_close(w[:, 0], torch.full((64, 5), 0.2))  # uniform at the first token
    got = ((w @ tasks) * xs).sum(-1)
    assert (got - dmmse_predict(xs, ys, tasks, 0.3)).abs().max() < 1e-5


def test_single_task_posterior_is_one_and_dmmse_is_the_task():
    t1 = task_set(1, 4, seed=0)
    xs, ys, _ = sample(32, 8, 4, 0.125, torch.Generator().manual_seed(1), tasks=t1)
    assert torch.equal(low_m.posterior_weights(xs, ys, t1, 0.125), torch.ones(32, 8, 1))
    assert torch.equal(dmmse_predict(xs, ys, t1, 0.125), (xs * t1[0]).sum(-1))


def test_two_task_posterior_by_hand():
    """t₁ = 1, t₂ = −1 (D = 1), σ² = 1/2: squared errors (0, 4) then (0.25, 2.25) give logits −Σ/(2σ²)."""
    tasks = torch.tensor([[1.0], [-1.0]])
    xs, ys = torch.tensor([[[1.0], [1.0], [2.0]]]), torch.tensor([[1.0, 0.5, 3.0]])
    p1 = low_m.posterior_weights(xs, ys, tasks, 0.5)[0, :, 0]
    torch.testing.assert_close(p1, torch.tensor([0.5, 1 / (1 + math.exp(-4.0)), 1 / (1 + math.exp(-6.0))]))


def test_posterior_validates_shapes():
    xs, ys, tasks = torch.zeros(2, 3, 4), torch.zeros(2, 3), torch.zeros(5, 4)
    for args, name in [((xs[0], ys, tasks, 1.0), "xs"), ((xs, ys[:, :2], tasks, 1.0), "ys"),
                       ((xs, ys, tasks[:, :3], 1.0), "tasks"), ((xs, ys, tasks, 0.0), "noise_var")]:
        with pytest.raises(ValueError, match=name):
            low_m.posterior_weights(*args)


# --- the per-token table --------------------------------------------------------------------------

def test_token_table_of_dmmse_and_ridge_models():
    task = _task(2)
    table = low_m.token_table(dmmse_model(task), task, n=N, seed=3)
    assert list(table["token"]) == list(range(1, 9))
    assert list(table.columns) == ["token", "mse_model", "mse_dmmse", "mse_ridge", "delta_dmmse", "delta_ridge",
                                   "p_true"]
    assert table["delta_dmmse"].max() < 1e-10
    np.testing.assert_allclose(table["mse_model"], table["mse_dmmse"], rtol=1e-6)
    t_mean = task.tasks().mean(0)  # first token: dMMSE predicts t̄ᵀx and ridge 0, so Δ ≈ |t̄|²
    assert table["delta_ridge"].iloc[0] == pytest.approx(float(t_mean @ t_mean), rel=0.2)
    assert table["p_true"].iloc[0] == pytest.approx(0.5)
    # E[p_k(true)] never falls with k (a submartingale); allow sampling noise
    assert table["p_true"].iloc[-1] > 0.9 and (np.diff(table["p_true"]) > -0.01).all()
    ridge = low_m.token_table(ridge_model(task), task, n=N, seed=3)
    assert ridge["delta_ridge"].max() < 1e-10 and ridge["delta_dmmse"].iloc[0] > 0.5
    assert ridge.equals(low_m.token_table(ridge_model(task), task, n=N, seed=3))  # its own seeded generator


def test_token_table_validates():
    task = _task(2)
    for n in (0, 1.5, True):
        with pytest.raises(ValueError, match="'n'"):
            low_m.token_table(dmmse_model(task), task, n=n)
    with pytest.raises(ValueError, match="'seed'"):
        low_m.token_table(dmmse_model(task), task, n=8, seed=-1)
    with pytest.raises(ValueError, match="'task'"):
        low_m.token_table(dmmse_model(task), ICLRegression(D=4, K=8, M=None), n=8)


# --- M = 1 -----------------------------------------------------------------------------------------

def test_single_task_holds_for_the_first_task_and_dmmse():
    task = _task(1)
    for model in (scaled_first_task_model(task, 1.0), dmmse_model(task), scaled_first_task_model(task, 1.05)):
        out = low_m.single_task_test(model, task, n=N, seed=0)
        assert out["holds"] and out["tol"] == low_m.SINGLE_TOL
        assert len(out["table"]) == 8 and out["first_token_rel_error"] == out["table"]["rel_error"].iloc[0]
    assert low_m.single_task_test(dmmse_model(task), task, n=N)["table"]["rel_error"].max() < 1e-12
    # ridge must learn t₁ from the context: relative error 1 at the first token
    assert out["table"]["rel_error_ridge"].iloc[0] == pytest.approx(1.0)


def test_single_task_fails_for_context_learners_and_wrong_scales():
    task = _task(1)
    for model in (ridge_model(task), zero_model(task), scaled_first_task_model(task, 1.2)):
        assert not low_m.single_task_test(model, task, n=N, seed=0)["holds"]
    # 1.2·t₁ᵀx has relative error 0.04: it holds only under a looser tolerance
    assert low_m.single_task_test(scaled_first_task_model(task, 1.2), task, n=N, tol=0.05)["holds"]


def test_single_task_validates():
    with pytest.raises(ValueError, match="'task'.*M = 1"):
        low_m.single_task_test(dmmse_model(_task(2)), _task(2), n=8)
    with pytest.raises(ValueError, match="'tol'"):
        low_m.single_task_test(dmmse_model(_task(1)), _task(1), n=8, tol=-0.1)


# --- M = 2 -----------------------------------------------------------------------------------------

def test_two_task_holds_for_dmmse_with_implied_weights_equal_to_the_posterior():
    task = _task(2)
    out = low_m.two_task_test(dmmse_model(task), task, n=N, seed=1)
    t = out["table"]
    assert out["holds"] and len(t) == 8
    assert t["rel_delta"].max() < 1e-10 and t["weight_mae"].max() < 1e-4
    assert t["implied_mean"].iloc[0] == pytest.approx(0.5, abs=1e-4)  # p_1 = 1/2
    assert t["posterior_mean"].iloc[0] == pytest.approx(0.5) and np.isnan(t["weight_corr"].iloc[0])
    assert (t["weight_corr"].iloc[1:] > 0.999).all()
    assert (t["n_used"] > 0.4 * N).all() and (t["n_used"] < N).all()  # the gap drops some sequences
    assert t["p_true"].iloc[0] == pytest.approx(0.5) and t["p_true"].iloc[-1] > 0.9


def test_two_task_fails_for_ridge_zero_and_the_task_mean():
    task = _task(2)
    for model in (ridge_model(task), zero_model(task), task_mean_model(task)):
        out = low_m.two_task_test(model, task, n=N, seed=1)
        assert not out["holds"]
    t = low_m.two_task_test(task_mean_model(task), task, n=N, seed=1)["table"]
    np.testing.assert_allclose(t["implied_mean"], 0.5, atol=1e-4)  # ignores the context: p̂ = 1/2 always
    assert t["rel_delta"].iloc[0] < 1e-10 and t["rel_delta"].iloc[-1] > 0.1


def test_two_task_validates():
    with pytest.raises(ValueError, match="'task'.*M = 2"):
        low_m.two_task_test(dmmse_model(_task(1)), _task(1), n=8)
    for kw, name in [({"tol": 0}, "tol"), ({"weight_tol": math.inf}, "weight_tol"), ({"gap": -1}, "gap"),
                     ({"n": 0}, "n")]:
        with pytest.raises(ValueError, match=f"'{name}'"):
            low_m.two_task_test(dmmse_model(_task(2)), _task(2), **{"n": 8, **kw})


# --- attention ---------------------------------------------------------------------------------------

def test_attention_of_a_tiny_transformer():
    torch.manual_seed(0)
    task = ICLRegression(D=2, K=4, noise_var=0.125, M=2)
    model = ICLTransformer(ICLConfig(D=2, K=4, n_layer=2, n_head=2, d_model=8, d_mlp=8))
    maps = low_m.attention_maps(model, task, n=16, seed=0)
    assert maps.shape == (2, 2, 8, 8)
    np.testing.assert_allclose(maps.sum(-1), 1.0, atol=1e-6)
    assert np.all(np.triu(maps, k=1) == 0)  # causal
    summary = low_m.attention_summary(model, task, n=16, seed=0)
    assert list(summary.columns) == ["layer", "head", "token", "target", "mass"] and len(summary) == 2 * 2 * 4 * 3
    totals = summary.groupby(["layer", "head", "token"])["mass"].sum()
    np.testing.assert_allclose(totals, 1.0, atol=1e-6)
    first = summary[summary["token"] == 1].set_index(["layer", "head", "target"])["mass"]
    np.testing.assert_allclose(first.xs("self", level="target"), 1.0)
    assert (first.xs("earlier_x", level="target") == 0).all() and (first.xs("earlier_y", level="target") == 0).all()
    later = summary[(summary["token"] > 1) & (summary["target"] != "self")]["mass"]
    assert (later > 0).all()  # later queries do see earlier tokens
    at = (summary["layer"] == 1) & (summary["head"] == 0) & (summary["token"] == 3)
    row = summary[at].set_index("target")["mass"]
    assert row["self"] == pytest.approx(maps[1, 0, 4, 4]) and row["earlier_y"] == pytest.approx(maps[1, 0, 4, [1, 3]].sum())
    with pytest.raises(ValueError, match="'n'"):
        low_m.attention_summary(model, task, n=0)


# --- per-sequence frame, the weight on the true task, sharpness ------------------------------------------

def tempered_dmmse_model(task, factor):
    """dMMSE with the noise variance multiplied by ``factor``: its log-odds are the Bayes ones / factor."""
    return Exact(lambda xs, ys, t: dmmse_predict(xs, ys, t, task.noise_var * factor), task.tasks())


def test_sequence_frame_of_dmmse_at_two_tasks():
    task = _task(2)
    f = low_m.sequence_frame(dmmse_model(task), task, n=N, seed=1)
    assert len(f) == N * 8 and list(f["token"][:8]) == list(range(1, 9)) and set(f["true"]) == {1, 2}
    assert (f.groupby("sequence")["true"].nunique() == 1).all()
    np.testing.assert_allclose(f["model"], f["dmmse"], atol=1e-6)
    kept = f[f["kept"]]
    np.testing.assert_allclose(kept["implied"], kept["p1"], atol=1e-4)  # dMMSE's implied weight is the posterior
    np.testing.assert_allclose(kept["implied_true"], kept["p_true"], atol=1e-4)
    np.testing.assert_allclose(f["p1"], 1 / (1 + np.exp(-f["log_odds"])), atol=1e-5)
    np.testing.assert_allclose(f.loc[f["token"] == 1, "p1"], 0.5)
    # the same sequences as the tests with this seed: the table's mean p_true per token
    table = low_m.token_table(dmmse_model(task), task, n=N, seed=1)
    np.testing.assert_allclose(f.groupby("token")["p_true"].mean(), table["p_true"], atol=1e-6)
    tasks = task.tasks()
    gap = np.abs(f["t1x"] - f["t2x"]) > low_m.GAP * float((tasks[0] - tasks[1]).norm())
    assert (gap == f["kept"]).all() and 0 < f["kept"].mean() < 1


def test_sequence_frame_at_one_task_and_validation():
    task = _task(1)
    f = low_m.sequence_frame(scaled_first_task_model(task, 1.0), task, n=32, seed=0)
    assert "implied" not in f and (f["p1"] == 1).all() and (f["true"] == 1).all()
    np.testing.assert_allclose(f["model"], f["t1x"], atol=1e-6)
    np.testing.assert_allclose(f["dmmse"], f["t1x"], atol=1e-6)
    with pytest.raises(ValueError, match="'task'.*M = 1 or 2"):
        low_m.sequence_frame(dmmse_model(_task(3)), _task(3), n=8)
    with pytest.raises(ValueError, match="'frame'"):
        low_m.weight_rise(f)
    with pytest.raises(ValueError, match="'frame'"):
        low_m.posterior_sharpness(f)


def test_weight_rise_of_dmmse_and_of_the_task_mean():
    task = _task(2)
    rise = low_m.weight_rise(low_m.sequence_frame(dmmse_model(task), task, n=N, seed=1), c=1.0)
    assert list(rise.columns) == ["token", "posterior_all", "posterior", "model", "n_used", "tempered"]
    np.testing.assert_allclose(rise["model"], rise["posterior"], atol=1e-4)
    np.testing.assert_allclose(rise["tempered"], rise["posterior"], atol=1e-5)
    assert rise["posterior"].iloc[0] == pytest.approx(0.5) and rise["posterior"].iloc[-1] > 0.9
    flat = low_m.weight_rise(low_m.sequence_frame(task_mean_model(task), task, n=N, seed=1))
    np.testing.assert_allclose(flat["model"], 0.5, atol=1e-4)  # ignores the context: never rises
    assert "tempered" not in flat


def test_posterior_sharpness_recovers_the_temperature():
    task = _task(2)
    exact = low_m.posterior_sharpness(low_m.sequence_frame(dmmse_model(task), task, n=N, seed=1))
    assert exact["c"] == pytest.approx(1.0, abs=0.01) and exact["mae_fit"] < 1e-3 and exact["mae_bayes"] < 1e-3
    assert exact["n"] > 0.4 * N * 7
    for factor in (2.0, 0.5):
        out = low_m.posterior_sharpness(low_m.sequence_frame(tempered_dmmse_model(task, factor), task, n=N, seed=1))
        assert out["c"] == pytest.approx(1 / factor, rel=0.02) and out["mae_fit"] < out["mae_bayes"]
    flat = low_m.posterior_sharpness(low_m.sequence_frame(task_mean_model(task), task, n=N, seed=1))
    assert flat["c"] < 0.06  # p̂ = 1/2 everywhere: the flattest c allowed


# --- foreign contexts ---------------------------------------------------------------------------------

def test_context_swap_at_one_task():
    task = _task(1)
    out = low_m.context_swap_test(scaled_first_task_model(task, 1.0), task, n=N, seed=0)
    t = out["table"]
    assert out["holds"] and out["tol"] == low_m.SINGLE_TOL
    assert list(t.columns) == ["token", "change_model", "change_dmmse", "change_ridge", "rel_delta"]
    assert (t["change_model"] == 0).all() and (t["change_dmmse"] == 0).all() and t["rel_delta"].max() < 1e-10
    assert t["change_ridge"].iloc[0] == 0 and (t["change_ridge"].iloc[1:] > 1).all()
    ridge = low_m.context_swap_test(ridge_model(task), task, n=N, seed=0)
    assert not ridge["holds"]
    np.testing.assert_allclose(ridge["table"]["change_model"], ridge["table"]["change_ridge"], rtol=1e-5)


def test_context_swap_at_two_tasks():
    task = _task(2)
    out = low_m.context_swap_test(dmmse_model(task), task, n=N, seed=0)
    t = out["table"]
    assert out["holds"] and t["rel_delta"].max() < 1e-10
    np.testing.assert_allclose(t["change_model"], t["change_dmmse"], rtol=1e-5)
    assert t["change_model"].iloc[0] == 0 and (t["change_model"].iloc[1:] > 0.01).all()
    assert not low_m.context_swap_test(task_mean_model(task), task, n=N, seed=0)["holds"]
    with pytest.raises(ValueError, match="'tol'"):
        low_m.context_swap_test(dmmse_model(task), task, n=8, tol=0)


# --- tables ---------------------------------------------------------------------------------------------

def test_attention_table_side_by_side():
    torch.manual_seed(0)
    task = ICLRegression(D=2, K=4, noise_var=0.125, M=2)
    model = ICLTransformer(ICLConfig(D=2, K=4, n_layer=2, n_head=2, d_model=8, d_mlp=8))
    summary = low_m.attention_summary(model, task, n=16, seed=0)
    table = low_m.attention_table({"1": summary, "2": summary})
    assert table.shape == (4, 6) and list(table.columns.get_level_values(1)[:3]) == ["self", "earlier_x", "earlier_y"]
    np.testing.assert_allclose(table["1"].sum(axis=1), 1.0, atol=1e-6)
    last = summary[(summary["token"] == 4) & (summary["layer"] == 1) & (summary["head"] == 0)].set_index("target")
    assert table.loc[(1, 0), ("2", "earlier_y")] == pytest.approx(last.loc["earlier_y", "mass"])
    np.testing.assert_allclose(low_m.attention_table({"1": summary}, token=1)[("1", "self")], 1.0)


def test_llc_contrast():
    table = pd.DataFrame({"M": [1, 1, 2, 2, 4], "seed": [0, 1, 0, 1, 0], "llc_mean": [1.0, 2.0, 4.0, 6.0, 9.0],
                          "llc_se": [0.3, 0.3, 0.4, 0.4, 1.0]})
    out = low_m.llc_contrast(table)
    assert out == {"low": 1.5, "high": 5.0, "diff": 3.5, "z": pytest.approx(3.5 / 0.5)}
    assert low_m.llc_contrast(table, 2, 4)["diff"] == pytest.approx(4.0)
    with pytest.raises(ValueError, match="M = \\[8\\]"):
        low_m.llc_contrast(table, 1, 8)


def test_mechanism_table_of_exact_and_wrong_predictors():
    one, two = _task(1), _task(2)
    args = dict(n=N, seed=1)
    single = low_m.single_task_test(dmmse_model(one), one, **args)
    frame = low_m.sequence_frame(dmmse_model(two), two, **args)
    table = low_m.mechanism_table(single, low_m.two_task_test(dmmse_model(two), two, **args),
                                  low_m.context_swap_test(dmmse_model(one), one, **args),
                                  low_m.posterior_sharpness(frame), {"z": 5.0})
    assert list(table.columns) == ["M", "hypothesis", "measure", "tolerance", "value", "holds"]
    assert len(table) == 7 and table["holds"].all()
    assert list(table["M"]) == ["M = 1"] * 3 + ["M = 2"] * 3 + ["λ̂"]
    wrong = low_m.mechanism_table(low_m.single_task_test(ridge_model(one), one, **args),
                                  low_m.two_task_test(task_mean_model(two), two, **args))
    assert len(wrong) == 4 and not wrong["holds"].any()  # ridge learns t₁ from the context; t̄ᵀx never updates


# --- figures: drawn at page width without error ------------------------------------------------------------

def test_figures_draw():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    one, two = _task(1), _task(2)
    frame = low_m.sequence_frame(dmmse_model(two), two, n=64, seed=0)
    torch.manual_seed(0)
    tiny = ICLTransformer(ICLConfig(D=2, K=4, n_layer=2, n_head=2, d_model=8, d_mlp=8))
    llc = pd.DataFrame({"M": [1, 2, 8, math.inf], "seed": 0, "llc_mean": [1.0, 2.0, 5.0, 9.0], "llc_se": 0.2})
    figs = [low_m_figures.token_figure({1: low_m.token_table(dmmse_model(one), one, n=64),
                                        2: low_m.token_table(dmmse_model(two), two, n=64)}, one.noise_var),
            low_m_figures.posterior_figure(frame, low_m.posterior_sharpness(frame)),
            low_m_figures.sequence_figure(frame, 0, title="M = 2"),
            low_m_figures.sequence_figure(low_m.sequence_frame(dmmse_model(one), one, n=8), 3),
            low_m_figures.context_figure({1: low_m.context_swap_test(dmmse_model(one), one, n=64),
                                          2: low_m.context_swap_test(dmmse_model(two), two, n=64)}),
            low_m_figures.attention_figure(low_m.attention_maps(tiny, ICLRegression(D=2, K=4, M=2), n=8), "tiny"),
            low_m_figures.llc_against_M_figure({"a": llc, "b": llc[llc["M"] < 3]})]
    for fig in figs:
        assert fig.get_figwidth() == pytest.approx(7.5)
        plt.close(fig)
    assert low_m_figures.token_labels(2) == ["x1", "y1", "x2", "y2"]
    with pytest.raises(ValueError, match="'sequence'"):
        low_m_figures.sequence_figure(frame, 10_000)


def test_task_table_and_mechanism_tally():
    task = _task(2)
    t = low_m.task_table(task)
    assert list(t.index) == ["t₁", "t₂"] and list(t.columns[:4]) == [f"component {d}" for d in range(1, 5)]
    tasks = task.tasks()
    assert t["norm"].iloc[1] == pytest.approx(float(tasks[1].norm()))
    assert t["distance to t₁"].iloc[0] == 0
    assert t["evidence per pair (nats)"].iloc[1] == pytest.approx(float((tasks[1] - tasks[0]).square().sum()) / 0.25)
    assert "distance to t₁" not in low_m.task_table(_task(1))
    with pytest.raises(ValueError, match="'task'"):
        low_m.task_table(ICLRegression(D=4, K=8, M=None))
    rows = pd.DataFrame({"M": ["M = 1", "M = 2"], "hypothesis": ["a", "b"], "tolerance": ["< 0.02", "< 0.1"],
                         "value": [0.001, 0.25], "holds": [True, False]})
    assert low_m.mechanism_tally(rows) == {"held": 1, "tests": 2, "not_holding": "M = 2, *b*: 0.25 against < 0.1"}
    assert low_m.mechanism_tally(rows.iloc[:1]) == {"held": 1, "tests": 1, "not_holding": "none"}
    both = rows.assign(holds=[False, False])
    assert low_m.mechanism_tally(both)["held"] == 0 and low_m.mechanism_tally(both)["not_holding"].count(";") == 1


def test_mechanism_tests_all_hold_for_exact_dmmse_and_not_for_ridge():
    exact = {M: (dmmse_model(_task(M)), _task(M)) for M in (1, 2)}
    table = low_m.mechanism_tests(exact, n=512)
    assert table["holds"].all() and len(table) == 6  # no λ̂ row without a table
    wrong = {M: (ridge_model(_task(M)), _task(M)) for M in (1, 2)}
    assert not low_m.mechanism_tests(wrong, n=512)["holds"].any()


def test_the_mechanism_tests_answer_the_opening_box_with_their_pass_marks():
    import pandas as pd
    table = pd.DataFrame({"M": ["M = 1", "M = 2"], "hypothesis": ["ignores the context", "its weight on t₁ is the posterior p_k"],
                          "measure": ["a", "b"], "tolerance": ["< 0.05", "< 0.1"], "value": [0.012345, 0.5],
                          "holds": [True, False]})
    answers = low_m.mechanism_answers(table)
    assert list(answers.columns) == ["question", "answer"]
    assert list(answers["question"]) == ["M = 1: ignores the context", "M = 2: its weight on t₁ is the posterior pₖ"]
    assert list(answers["answer"]) == ["holds (0.0123, pass mark < 0.05)", "fails (0.5, pass mark < 0.1)"]
