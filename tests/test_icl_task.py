"""The in-context regression task through the one training loop: train, train_many, evaluation, tables."""
import math

import pandas as pd
import pytest
import torch

from plateau_lib.engine.runs import TrainConfig
from plateau_lib.engine.tasks import make_task
from plateau_lib.engine.train import train, train_many
from plateau_lib.icl import ICLConfig

TINY = TrainConfig(task="icl_regression", task_kwargs={"D": 2, "K": 4}, n_layer=2, n_head=2, d_model=16,
                   schedule="one_cycle", lr=3e-3, batch_size=32, steps=30, eval_every=10, eval_batch=64, device="cpu")


def test_paper_config_builds_hooglands_model():
    cfg = TrainConfig(task="icl_regression", task_kwargs={"D": 4, "K": 8, "noise_var": 0.125},
                      n_layer=2, n_head=4, d_model=64, schedule="one_cycle", lr=3e-3, batch_size=256)
    assert cfg.model_config() == ICLConfig(D=4, K=8, n_layer=2, n_head=4, d_model=64, d_mlp=64, doubled_residual=True)
    assert sum(p.numel() for p in cfg.make_task().build_model(cfg).parameters()) == 51_717


def test_trains_through_train_and_reports_the_markers():
    result = train(TINY.replace(task_kwargs={"D": 2, "K": 4, "M": 4}), progress=False)
    m = result.metrics
    assert m.step.tolist() == [0, 10, 20, 30] and (m.seed == 0).all()
    assert m.loss.iloc[-1] < m.loss.iloc[0]
    expected = {"loss", "loss_ridge", "delta_ridge", "pred_sq", "icl_score", "icl_1_D", "icl_D_K", "loss_ood_inputs",
                "loss_ood_tasks", "loss_dmmse", "delta_dmmse", "delta_task_mean", "loss_true", "delta_ridge_true",
                "delta_dmmse_true", "weight_norm"}
    assert expected <= set(m.columns) and m[list(expected)].notna().all().all()
    assert (m.loss_ridge == m.loss_ridge.iloc[0]).all()  # baselines of the fixed held-out batch
    tokens = result.positions
    assert list(tokens.columns) == ["step", "seed", "token", "loss", "delta_ridge", "delta_dmmse"]
    assert tokens.token.tolist()[:4] == [1, 2, 3, 4] and len(tokens) == 4 * 4
    means = tokens.groupby("step").loss.mean().to_numpy()
    assert abs(means - m.loss.to_numpy()).max() < 1e-5
    row = m.iloc[-1]
    last = tokens[tokens.step == 30].set_index("token").loss
    assert abs(row.icl_score - (last[4] - last[1])) < 1e-5 and abs(row.icl_1_D - (last[2] - last[1])) < 1e-5
    assert result.arrays["attn"].shape == (4, 2, 2, 8, 8) and result.arrays["pred"].shape == (4, 16, 4)
    assert result.arrays["step"].tolist() == [0, 10, 20, 30]


def test_gaussian_tasks_have_no_dmmse_columns():
    result = train(TINY.replace(steps=5, eval_every=5), progress=False)
    assert "delta_dmmse" not in result.metrics and "delta_dmmse" not in result.positions
    assert not math.isnan(result.metrics.delta_ridge.iloc[-1])


def test_stacked_runs_equal_sequential_runs():
    configs = [TINY, TINY.replace(seed=1, task_kwargs={"D": 2, "K": 4, "M": 3, "noise_var": 0.5}),
               TINY.replace(seed=2, steps=12, lr=1e-2)]
    sequential = train_many(configs, backend="sequential", progress=False)
    stacked = train_many(configs, backend="stacked", progress=False)
    for a, b in zip(sequential, stacked):
        pd.testing.assert_frame_equal(a.metrics, b.metrics, check_exact=False, atol=1e-5, rtol=1e-5)
        pd.testing.assert_frame_equal(a.positions, b.positions, check_exact=False, atol=1e-5, rtol=1e-5)
        for k in a.final_state:
            torch.testing.assert_close(a.final_state[k], b.final_state[k], atol=1e-5, rtol=1e-5)


def test_no_attention_bias_intervention():
    task = make_task("icl_regression")
    assert task.attention_bias(1.0, "cpu") is None
    with pytest.raises(ValueError, match="not defined"):
        task.attention_bias(2.0, "cpu")
    with pytest.raises(ValueError, match="attn_bias_c"):
        TINY.replace(attn_bias_c=2.0)


def test_loss_is_the_mse_of_the_k_predictions(gen):
    task = make_task("icl_regression", D=2, K=4)
    model = task.build_model(TINY)
    xs, ys, ws = batch = task.sample(8, gen)
    assert torch.equal(task.loss(model, batch), ((model(xs, ys) - ys) ** 2).mean())
