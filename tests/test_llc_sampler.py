"""The SGLD sampler and estimator: bad input, batched == single chain, seeding, divergence, MALA."""
import math

import numpy as np
import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from plateau_lib.book import pages
from plateau_lib.llc import LLCWarning, SGLDConfig, default_nbeta, estimate_llc, mala_acceptance_prob
from plateau_lib.llc.estimator import summarize
from plateau_lib.llc.golden import (PolynomialModel, RegularModel, least_squares_fit, mse_loss, polynomial_data,
    regular_data)
from plateau_lib.llc.sampler import make_generator
from plateau_lib.plateau.model import GPT, GPTConfig

torch.set_num_threads(1)


def tiny_gpt(seed=0):
    torch.manual_seed(seed)
    return GPT(GPTConfig(vocab_size=7, block_size=6, n_layer=1, n_head=2, d_model=8))


def lm_loss(model, batch):
    x, y = batch
    return F.cross_entropy(model(x).flatten(0, 1), y.flatten())


def lm_data(n=64, seed=0):
    g = torch.Generator().manual_seed(seed)
    s = torch.randint(0, 7, (n, 7), generator=g)
    return s[:, :-1], s[:, 1:]


REG = regular_data(3, 1, n=200, seed=0)
SG = SGLDConfig(epsilon=1e-3, gamma=10.0, num_chains=2, num_draws=5, seed=0)


# ------------------------------------------------------------------------------------------------ bad input
@pytest.mark.parametrize("fields,run,word", [
    (dict(epsilon=0.0), {}, "epsilon"), (dict(epsilon=-1e-3), {}, "epsilon"), (dict(epsilon=float("nan")), {}, "epsilon"),
    (dict(nbeta=0.0), {}, "nbeta"), (dict(nbeta=-2.0), {}, "nbeta"), (dict(gamma=-1.0), {}, "gamma"),
    (dict(num_chains=0), {}, "num_chains"), (dict(num_chains=1.5), {}, "num_chains"), (dict(num_draws=0), {}, "num_draws"),
    (dict(num_burnin_steps=5), {}, "num_burnin_steps"), (dict(num_burnin_steps=9), {}, "num_burnin_steps"),
    (dict(num_steps_bw_draws=0), {}, "num_steps_bw_draws"), (dict(weight_decay=-1.0), {}, "weight_decay"),
    (dict(batch_size=0), {}, "batch_size"), (dict(seed=-1), {}, "seed"), ({}, dict(chain_ids=[]), "chain_ids"),
    ({}, dict(init_loss_batches=0), "init_loss_batches"), ({}, dict(max_loss_ratio=0.0), "max_loss_ratio"),
    ({}, dict(init_loss=float("inf")), "init_loss"),
])
def test_bad_settings_raise_before_sampling(fields, run, word):
    with pytest.raises(ValueError, match=word):
        estimate_llc(RegularModel(3), mse_loss, REG, SG.replace(**fields), device="cpu", **run)


def test_settings_must_be_an_sgld_config():
    with pytest.raises(ValueError, match="sgld must be an SGLDConfig"):
        estimate_llc(RegularModel(3), mse_loss, REG, {"epsilon": 1e-3}, device="cpu")
    with pytest.raises(TypeError, match="lr"):  # devinterp's spellings are not run options
        estimate_llc(RegularModel(3), mse_loss, REG, SG, lr=1e-3)


def test_no_trainable_parameters():
    model = RegularModel(3)
    for p in model.parameters():
        p.requires_grad_(False)
    with pytest.raises(ValueError, match="no trainable parameters"):
        estimate_llc(model, mse_loss, REG, SG, device="cpu")


def test_loss_not_scalar():
    with pytest.raises(ValueError, match="scalar"):
        estimate_llc(RegularModel(3), lambda m, b: (m(b[0]) - b[1]) ** 2, REG, SG, device="cpu")
    with pytest.raises(ValueError, match="scalar"):
        estimate_llc(RegularModel(3), lambda m, b: 1.0, REG, SG, device="cpu")


def test_bad_data():
    with pytest.raises(ValueError, match="first dimension"):
        estimate_llc(RegularModel(3), mse_loss, (REG[0], REG[1][:10]), SG, device="cpu")
    with pytest.raises(ValueError, match="data must be"):
        estimate_llc(RegularModel(3), mse_loss, [1, 2, 3], SG, device="cpu")


def test_default_nbeta_is_devinterps():
    assert default_nbeta(1000) == pytest.approx(144.7648, abs=1e-3)
    assert default_nbeta(1024) == pytest.approx(147.7320, abs=1e-3)
    assert default_nbeta(1) == 1.0
    res = estimate_llc(RegularModel(3), mse_loss, REG, SG.replace(batch_size=32), warn=False, device="cpu")
    assert res.hyperparams["nbeta"] == pytest.approx(32 / math.log(32))
    res = estimate_llc(RegularModel(3), mse_loss, REG, SG, warn=False, device="cpu")  # full batch: n / ln n
    assert res.hyperparams["nbeta"] == pytest.approx(200 / math.log(200))


# ------------------------------------------------------------------------------------------------ batched == single
def reference_chain(model, loss_fn, data, chain, *, epsilon, nbeta, gamma, weight_decay, steps, seed, batch_size):
    """A plain autograd loop over one chain with the same seeded streams (shared batches)."""
    params = [p for p in model.parameters() if p.requires_grad]
    w_star = torch.nn.utils.parameters_to_vector(params).detach().clone()
    w = w_star.clone()
    g_noise = make_generator(seed, chain, "noise", "cpu")
    g_batch = make_generator(seed, -1, "batch", "cpu")
    n = data[0].shape[0]
    buffer = torch.empty(0, dtype=torch.long)
    losses = []
    for _ in range(steps):
        if buffer.numel() < batch_size:
            buffer = torch.cat([buffer, torch.randperm(n, generator=g_batch)])
        idx, buffer = buffer[:batch_size], buffer[batch_size:]
        torch.nn.utils.vector_to_parameters(w, params)
        for p in params:
            p.grad = None
        loss = loss_fn(model, tuple(t[idx] for t in data))
        loss.backward()
        grad = torch.cat([p.grad.reshape(-1) for p in params])
        losses.append(loss.item())
        drift = nbeta * grad + gamma * (w - w_star) + weight_decay * w
        noise = torch.empty_like(w).normal_(generator=g_noise)
        w = w - 0.5 * epsilon * drift + math.sqrt(epsilon) * noise
    torch.nn.utils.vector_to_parameters(w_star, params)
    return np.array(losses)


@pytest.mark.parametrize("backend", ["sequential", "vmap"])
def test_chains_equal_plain_single_chain_loop(backend):
    data = lm_data(64)
    hp = dict(epsilon=3e-3, nbeta=20.0, gamma=50.0, weight_decay=0.01)
    res = estimate_llc(tiny_gpt(), lm_loss, data, SGLDConfig(num_chains=3, num_draws=30, batch_size=16, seed=7,
                                                             share_batches=True, **hp), device="cpu", backend=backend)
    for c in range(3):
        ref = reference_chain(tiny_gpt(), lm_loss, data, c, steps=30, seed=7, batch_size=16, **hp)
        np.testing.assert_allclose(res.loss_trace_all[c], ref, rtol=1e-4, atol=1e-5)
    # chains differ from each other (noise is per chain)
    assert not np.allclose(res.loss_trace_all[0], res.loss_trace_all[1])


@pytest.mark.parametrize("share", [True, False])
@pytest.mark.parametrize("backend", ["sequential", "vmap"])
def test_chain_alone_equals_chain_in_batch(share, backend):
    data = lm_data(64)
    sgld = SGLDConfig(epsilon=3e-3, nbeta=20.0, gamma=50.0, num_draws=25, batch_size=16, seed=3, share_batches=share)
    together = estimate_llc(tiny_gpt(), lm_loss, data, sgld.replace(num_chains=4), device="cpu", backend=backend)
    for c in (0, 2):
        alone = estimate_llc(tiny_gpt(), lm_loss, data, sgld, chain_ids=[c], device="cpu", backend=backend)
        np.testing.assert_allclose(alone.loss_trace_all[0], together.loss_trace_all[c], rtol=1e-5, atol=1e-6)
        assert alone.llc_per_chain[0] == pytest.approx(together.llc_per_chain[c], rel=1e-4, abs=1e-4)


# ------------------------------------------------------------------------------------------------ seeding
def test_same_seed_same_numbers_and_different_seed_different():
    data = lm_data(64)
    sgld = SGLDConfig(epsilon=3e-3, gamma=50.0, num_chains=2, num_draws=10, batch_size=16)
    a = estimate_llc(tiny_gpt(), lm_loss, data, sgld.replace(seed=11), device="cpu")
    b = estimate_llc(tiny_gpt(), lm_loss, data, sgld.replace(seed=11), device="cpu")
    c = estimate_llc(tiny_gpt(), lm_loss, data, sgld.replace(seed=12), device="cpu")
    assert (a.loss_trace_all == b.loss_trace_all).all()
    assert not np.allclose(a.loss_trace_all, c.loss_trace_all)


class Offset(nn.Module):
    """Loss-free weights: the final weights minus w* are exactly the accumulated noise."""

    def __init__(self, value):
        super().__init__()
        self.w = nn.Parameter(torch.full((5,), float(value)))

    def forward(self, x):
        return x.mean() + 0 * self.w.sum()


@pytest.mark.parametrize("backend", ["sequential", "vmap"])
def test_same_noise_and_batches_at_every_checkpoint(backend):
    """Two different 'checkpoints' with the same seed receive the same noise and the same batches."""
    x = torch.arange(40.0).reshape(40, 1)
    kw = dict(epsilon=1e-2, gamma=0.0, nbeta=1.0, num_chains=3, num_draws=20, batch_size=4, seed=5)
    from plateau_lib.llc.sampler import make_batches, sgld_sample
    loss = lambda m, b: m(b)  # noqa: E731 - loss = mean of the batch: the batch sequence is visible
    out = sgld_sample([Offset(0.0), Offset(3.0)], loss, make_batches(x, 4, torch.device("cpu")), weight_decay=0.0,
                      num_steps=20, chain_ids=[0, 1, 2], share_batches=True, mala=False, backend=backend,
                      **{k: v for k, v in kw.items() if k in ("epsilon", "gamma", "nbeta", "seed")},
                      device=torch.device("cpu"))
    outs = [{"final": out["final"][k], "loss": out["loss"][k]} for k in range(2)]
    torch.testing.assert_close(outs[0]["final"] - 0.0, outs[1]["final"] - 3.0, rtol=0, atol=1e-5)
    torch.testing.assert_close(outs[0]["loss"], outs[1]["loss"])  # same batches
    # shared batches: every chain sees the same batch; unshared: they differ
    assert (outs[0]["loss"][0] == outs[0]["loss"][1]).all()
    shared = estimate_llc(Offset(0.0), loss, x, SGLDConfig(share_batches=True, **kw), device="cpu")
    own = estimate_llc(Offset(0.0), loss, x, SGLDConfig(share_batches=False, **kw), device="cpu")
    assert (shared.loss_trace_all[0] == shared.loss_trace_all[2]).all()
    assert not (own.loss_trace_all[0] == own.loss_trace_all[2]).all()
    # without replacement within an epoch: 10 batches of 4 cover the 40 examples once
    assert np.isclose(own.loss_trace_all[0, :10].sum() * 4, x.sum().item())


def test_callable_data_online():
    gen_batches = []

    def sample_batch(g):
        s = torch.randint(0, 7, (16, 7), generator=g)
        gen_batches.append(s)
        return s[:, :-1], s[:, 1:]

    res = estimate_llc(tiny_gpt(), lm_loss, sample_batch, SGLDConfig(epsilon=3e-3, gamma=50.0, num_chains=2,
                                                                     num_draws=10, seed=0),
                       device="cpu", init_loss_batches=4)
    assert res.hyperparams["nbeta"] == pytest.approx(16 / math.log(16))
    assert np.isfinite(res.llc_mean) and res.loss_trace.shape == (2, 10)


# ------------------------------------------------------------------------------------------------ estimator
def test_estimator_formula_and_draw_selection():
    data = lm_data(64)
    res = estimate_llc(tiny_gpt(), lm_loss, data, SGLDConfig(epsilon=3e-3, gamma=50.0, nbeta=10.0, num_chains=3,
                                                             num_draws=6, num_burnin_steps=4, num_steps_bw_draws=2,
                                                             batch_size=16, seed=0), device="cpu")
    assert res.loss_trace_all.shape == (3, 4 + 6 * 2)
    np.testing.assert_array_equal(res.loss_trace, res.loss_trace_all[:, 4::2])
    per_chain = 10.0 * (res.loss_trace.mean(1) - res.init_loss)
    np.testing.assert_allclose(res.llc_per_chain, per_chain)
    assert res.llc_mean == pytest.approx(per_chain.mean())
    assert res.llc_std == pytest.approx(per_chain.std(ddof=1))
    assert res.llc_se == pytest.approx(per_chain.std(ddof=1) / math.sqrt(3))
    np.testing.assert_allclose(res.llc_running[:, -1], per_chain)
    assert res.final_llc(2) == pytest.approx((10.0 * (res.loss_trace[:, -2:].mean(1) - res.init_loss)).mean())
    table = res.table()
    assert list(table.columns) == ["chain", "draw", "loss", "llc", "llc_running", "diverged"] and len(table) == 18
    assert set(res.to_devinterp()) >= {"llc/mean", "llc/std", "loss/trace", "llc-chain/0"}
    # init loss: full data at w*, under no_grad
    with torch.no_grad():
        assert res.init_loss == pytest.approx(lm_loss(tiny_gpt(), data).item(), rel=1e-5)
    # with no burn-in, draw 0 is the loss at w* (on the first batch)
    r0 = estimate_llc(tiny_gpt(), lm_loss, data, SGLDConfig(epsilon=3e-3, gamma=50.0, num_chains=2, num_draws=3,
                                                            seed=0), device="cpu")
    assert r0.loss_trace[0, 0] == pytest.approx(res.init_loss, rel=1e-5)  # full batch: first batch = all data


def test_divergence_marked_excluded_and_warned():
    loss = np.array([[1.0, 1.1, 1.2], [1.0, np.nan, np.nan], [1.0, 500.0, 2.0], [1.0, 1.3, 1.1]])
    hyper = dict(nbeta=10.0, num_burnin_steps=0, num_steps_bw_draws=1, num_draws=3, num_params=4)
    with pytest.warns(LLCWarning, match="2 of 4 chains diverged"):
        res = summarize(loss, 1.0, hyper, [0, 1, 2, 3], 1.0)
    np.testing.assert_array_equal(res.diverged, [False, True, True, False])
    assert res.llc_mean == pytest.approx(np.mean([10 * 0.1, 10 * (0.4 / 3)]))
    assert res.num_ok == 2 and "diverged" in res.warnings[0]


def test_real_run_divergence():
    """A step size far too large for a steep quartic: every chain blows up, no estimate, a warning."""
    data = polynomial_data(200, seed=0)
    with pytest.warns(LLCWarning, match="diverged"):
        res = estimate_llc(PolynomialModel((2, 2), init=(0.5, 0.5)), mse_loss, data,
                           SGLDConfig(epsilon=5.0, gamma=0.0, num_chains=3, num_draws=30, seed=0), device="cpu")
    assert res.diverged.all() and math.isnan(res.llc_mean)


def test_negative_llc_warns():
    """Away from a minimum (an untrained regression), the chains descend: a negative estimate and a warning."""
    data = regular_data(5, 1, n=500, seed=0)
    torch.manual_seed(0)
    with pytest.warns(LLCWarning, match="negative"):
        res = estimate_llc(RegularModel(5), mse_loss, data,
                           SGLDConfig(epsilon=1e-3, gamma=0.0, num_chains=2, num_draws=50, seed=0), device="cpu")
    assert res.llc_mean < 0


def test_model_not_modified():
    model = tiny_gpt()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    estimate_llc(model, lm_loss, lm_data(32), SGLDConfig(epsilon=1e-2, gamma=1.0, num_chains=2, num_draws=5, seed=0),
                 device="cpu")
    for k, v in model.state_dict().items():
        assert torch.equal(v, before[k])


# ------------------------------------------------------------------------------------------------ MALA
@pytest.mark.parametrize("args,expected", [
    (([0, 0], [0, 0], 0, [1.5, 5.5], [1.5, 5.5], 16.25, 0.1), 0.6661436),
    (([1, 1], [1, 1], 1, [1.5, 0.5], [1.5, 0.5], 1.25, 0.5), 0.9692332),
    (([0, 0], [0, 0], 0, [10.5, 5.5], [10.5, 5.5], 70.25, 0.1), 0.17268492),
    (([0, 0], [0, 0], 0, [10.5, 5.5], [10.5, 5.5], 70.25, 0.5), 0.00015359),
])
def test_mala_acceptance_formula(args, expected):
    """devinterp's published values are float32 computations: exact (1e-6, or half the last published digit) in float32; float64 within 1e-4."""
    as32 = [torch.tensor(a, dtype=torch.float32) if isinstance(a, list) else a for a in args]
    assert float(mala_acceptance_prob(*as32)) == pytest.approx(expected, rel=1e-6, abs=5e-9)  # 0.00015359: 5 digits
    assert float(mala_acceptance_prob(*args)) == pytest.approx(expected, rel=1e-4)


def test_mala_in_a_run_tracks_step_size():
    data = regular_data(3, 1, n=500, seed=0)
    model = least_squares_fit(RegularModel(3), data)
    sgld = SGLDConfig(gamma=1.0, num_chains=2, num_draws=200, seed=0)
    small = estimate_llc(model, mse_loss, data, sgld.replace(epsilon=1e-5), device="cpu", mala=True)
    large = estimate_llc(model, mse_loss, data, sgld.replace(epsilon=3e-3), device="cpu", mala=True)
    assert small.mala_accept.shape == (2, 199)
    assert small.mala_mean > 0.95 and large.mala_mean < small.mala_mean
    assert np.isnan(estimate_llc(model, mse_loss, data, SG, device="cpu").mala_mean)


# ------------------------------------------------------------------------------------------------ page helpers
from plateau_lib.llc import calibration, callbacks, failure_modes, mistakes


def fake_result(loss, init_loss=1.0, nbeta=10.0, warn=False):
    loss = np.asarray(loss, dtype=float)
    hyper = dict(nbeta=nbeta, num_burnin_steps=0, num_steps_bw_draws=1, num_draws=loss.shape[1], num_params=4,
                 epsilon=1e-3, gamma=1.0)
    return summarize(loss, init_loss, hyper, list(range(len(loss))), 1.0, warn=warn)


def test_evenly_spaced_steps_and_middle_epsilon():
    assert callbacks.evenly_spaced_steps(300) == [50, 100, 150, 200, 250, 300]
    assert callbacks.evenly_spaced_steps(20) == [3, 6, 10, 13, 16, 20]
    assert callbacks.evenly_spaced_steps(3, n=6) == [1, 2, 3]
    assert calibration.middle_epsilon([3e-3, 3e-4, 1e-3, 1e-3]) == 1e-3
    assert calibration.middle_epsilon([1e-4, 3e-4, 1e-3, 3e-3]) == 1e-3
    assert calibration.middle_epsilon([0.01]) == 0.01
    with pytest.raises(ValueError, match="empty"):
        calibration.middle_epsilon([])


def test_llc_callback_same_seed_and_fresh_seed():
    """On an unchanged model the same-seed callback repeats its estimate; the fresh-seed one does not, and
    uses seed + FRESH_SEED_OFFSET + step."""
    model = least_squares_fit(RegularModel(3), REG)
    sgld = SGLDConfig(epsilon=1e-3, gamma=10.0, num_chains=2, num_draws=8, batch_size=50, seed=5)
    same = callbacks.LLCCallback(mse_loss, REG, [1, 2], sgld, progress=False, device="cpu", warn=False)
    fresh = callbacks.LLCCallback(mse_loss, REG, [1, 2], sgld, progress=False, fresh_seed=True, device="cpu", warn=False)
    for step in range(4):
        same(step, model)
        fresh(step, model)
    assert same.seed_at(2) == 5 and fresh.seed_at(2) == 5 + callbacks.FRESH_SEED_OFFSET + 2
    assert same.results[1].llc_mean == same.results[2].llc_mean
    assert fresh.results[1].llc_mean != fresh.results[2].llc_mean
    direct = estimate_llc(model, mse_loss, REG, sgld.replace(seed=5 + callbacks.FRESH_SEED_OFFSET + 2), device="cpu",
                          warn=False)
    assert fresh.results[2].llc_mean == direct.llc_mean
    assert list(fresh.table().step) == [1, 2] and list(fresh.table().columns) == callbacks.LLC_COLUMNS


def test_step_progress_counts_the_chosen_steps():
    ticks = callbacks.StepProgress([2, 4], per_step=2, progress=False)
    for step in range(6):
        ticks(step, None)
    assert ticks.done == 4 == ticks.total


def test_llc_over_training_compares_the_seedings():
    from plateau_lib.engine.runs import TrainConfig
    cfg = TrainConfig(d_model=8, steps=4, batch_size=8, eval_every=2, eval_batch=8, lr=1e-3, device="cpu")
    seqs = cfg.make_task().sample(64, torch.Generator().manual_seed(0))
    from plateau_lib.plateau.llc_transformer import sequence_loss
    sgld = SGLDConfig(epsilon=1e-3, gamma=100.0, num_chains=2, num_draws=4, batch_size=16, seed=0)
    curve, run = callbacks.train_with_online_llc(cfg, sequence_loss, seqs, [2, 4], sgld, progress=False, device="cpu",
                                                 warn=False)
    assert sorted(curve.seeding.unique()) == sorted([callbacks.SAME_SEED, callbacks.FRESH_SEED])
    assert len(curve) == 4 and set(curve.step) == {2, 4}
    assert run.meta["wall_time_s"] > 0 and run.metrics.step.max() == 4 and run.meta["commit"] and run.meta["date"]


def test_naive_scores_on_a_quadratic_loss():
    """At the least-squares fit the loss is exactly quadratic: E[L(w* + σz) − L(w*)] = σ² tr(X̃ᵀX̃)/n."""
    data = regular_data(3, 1, n=500, seed=0)
    model = least_squares_fit(RegularModel(3), data)
    before = [p.detach().clone() for p in model.parameters()]
    X = torch.cat([data[0], torch.ones(500, 1)], 1).double()
    expected_per_sigma2 = float((X ** 2).sum() / 500)
    rows = mistakes.naive_scores(model, mse_loss, data, nbeta=2.0, sigmas=(0.03, 0.1), draws=2000, seed=0)
    assert [r["σ"] for r in rows] == [0.03, 0.1]
    for r in rows:
        assert r[mistakes.FRESH] == pytest.approx(2.0 * r["σ"] ** 2 * expected_per_sigma2, rel=0.1)
        assert abs(r[mistakes.PAIRWISE]) < 0.01 * r[mistakes.FRESH]
    assert rows[0][mistakes.INVERTED] > rows[1][mistakes.INVERTED]  # the inverted score runs the other way
    for p, p0 in zip(model.parameters(), before):
        assert torch.equal(p, p0)
    table = mistakes.naive_table({"a": model, "b": model}, mse_loss, data, 2.0, sigmas=(0.1,), draws=5)
    assert list(table.model) == ["a", "b"]
    with pytest.raises(ValueError, match="draws"):
        mistakes.naive_scores(model, mse_loss, data, 2.0, draws=1)


def test_burn_in_table_rows():
    model = least_squares_fit(RegularModel(3), REG)
    sgld = SGLDConfig(epsilon=1e-3, gamma=10.0, num_chains=2, num_draws=99, seed=0)
    table = mistakes.burn_in_table(model, mse_loss, REG, (6, 2, 6), sgld, device="cpu", warn=False)
    assert list(zip(table.draws, table["burn-in"])) == [(2, 0), (2, 1), (6, 0), (6, 3)]
    direct = estimate_llc(model, mse_loss, REG, sgld.replace(num_draws=6, num_burnin_steps=3), device="cpu", warn=False)
    assert table["λ̂"].iloc[3] == direct.llc_mean


def test_failure_mode_helpers_by_hand():
    res = fake_result([[1.0, 1.2, 1.1], [1.0, np.nan, np.nan], [1.0, 0.9, 0.8]])
    assert failure_modes.last_loss_gap(res) == pytest.approx(np.mean([0.1, -0.2]))
    assert failure_modes.finite_draw_mean(res) == pytest.approx(10 * np.mean([0, 0.2, 0.1, 0, 0, -0.1, -0.2]))
    assert "diverged" in failure_modes.short_warning(res)
    assert all(len(w) <= 20 for w in failure_modes.short_warning(res, 20).split("; "))
    every = fake_result([[1.0, np.inf]])
    assert np.isnan(failure_modes.last_loss_gap(every)) and failure_modes.finite_draw_mean(every) == 0.0
    summary = failure_modes.diverged_summary(res)
    assert (summary["diverged"], summary["chains"], summary["kept"]) == (1, 3, 2)
    assert summary["reported"] == f"{res.llc_mean:.3g}" and summary["finite_mean"] == f"{failure_modes.finite_draw_mean(res):.3g}"
    assert summary["warning"] == res.warnings[0] and "diverged" in summary["warning"]
    none_left = failure_modes.diverged_summary(every)
    assert (none_left["diverged"], none_left["kept"], none_left["reported"]) == (1, 0, pages.MISSING)
    table = failure_modes.failure_table({"a": res, "b": every})
    assert list(table.index) == ["a", "b"] and table.loc["a", "diverged chains"] == 1
    assert {"λ̂", "SE", "converged", "MALA", "last loss − L(w*)", "warning"} <= set(table.columns)


def test_run_failure_modes_records_warnings_without_printing():
    import warnings
    early = RegularModel(3)  # untrained: not a minimum
    cases = failure_modes.failure_cases(least_squares_fit(RegularModel(3), REG), early)
    assert list(cases) == [failure_modes.DIVERGED, failure_modes.NOT_CONVERGED, failure_modes.ESCAPED,
                           failure_modes.NEGATIVE]
    with warnings.catch_warnings():
        warnings.simplefilter("error", LLCWarning)
        results = failure_modes.run_failure_modes(cases, mse_loss, REG, SGLDConfig(num_chains=2, num_draws=20, seed=0),
                                                  device="cpu")
    assert results[failure_modes.ESCAPED].llc_mean < 0 and results[failure_modes.ESCAPED].warnings
    assert results[failure_modes.NOT_CONVERGED].hyperparams["epsilon"] == 1e-6


def test_transformer_helpers(tmp_path, use_store):
    from plateau_lib.plateau import llc_transformer, metrics as M
    settings = {"d_model": 8, "train_steps": 30}
    cfg = llc_transformer.transformer_config(settings)
    assert (cfg.d_model, cfg.steps, cfg.lr, cfg.batch_size, cfg.task) == (8, 30, 1e-3, 128, "mws")
    assert llc_transformer.early_config(cfg).steps == 10 and llc_transformer.early_config(cfg.replace(steps=500)).steps == 50
    seqs = llc_transformer.sgld_sequences(cfg, 16)
    assert torch.equal(seqs, llc_transformer.sgld_sequences(cfg, 16)) and seqs.shape[0] == 16
    use_store(local=tmp_path)  # train into a temporary cache
    trained = llc_transformer.load_trained(cfg.replace(steps=3, eval_every=3, batch_size=8, eval_batch=8), use_cache=False)
    assert trained.num_params == sum(p.numel() for p in trained.model.parameters())
    with torch.no_grad():
        expected = M.loss_all(trained.model(seqs[:, :-1]), seqs).item()
    assert llc_transformer.loss_at(trained.model, seqs) == pytest.approx(expected)


def test_page_settings_and_provenance():
    from plateau_lib.llc import calibration_page, presets
    settings = presets.llc_page("cpu")
    table = calibration_page.settings_table(settings, "cpu")
    assert list(table.index) == list(settings) and (table["meaning"] != "").all()
    assert table.loc["epsilons", "cpu"] == ", ".join(f"{e:g}" for e in settings["epsilons"])  # 0.0003, 0.001, 0.003
    assert table.loc["nbetas", "cpu"] == "default (batch ÷ ln batch), 100"  # None: the estimator's default m / ln m

    class Estimate:  # the two fields the row reads
        wall_s = 1.25
    row = calibration_page.golden_provenance_row([Estimate(), Estimate()], "cpu")
    assert set(row) == {"preset", "run", "device", "wall time (s)", "source", "commit", "date"}
    assert row["wall time (s)"] == 2.5 and "2 SGLD estimates" in row["run"]
    assert calibration_page.sgld_device() in ("cpu", "cuda", "mps")


def test_page_figures_fit_the_text_column():
    """Every figure of the LLC page is at most PAGE_WIDTH wide (panels in rows of two), text >= 9 pt."""
    import matplotlib
    import matplotlib.pyplot as plt
    import pandas as pd
    from matplotlib.text import Text

    from plateau_lib.book import pages
    from plateau_lib.book.plots import PAGE_WIDTH
    from plateau_lib.llc import plots
    from plateau_lib.llc.golden import GoldenEstimate

    res = fake_result([[1.0, 1.2, 1.1, 1.3], [1.0, 1.1, 1.2, 1.2], [1.0, 1e9, np.nan, np.nan]])
    estimates = [GoldenEstimate("polynomial", f"({i}, 1)", 0.5, metric, res, 0.1)
                 for i, metric in enumerate(plots.GOLDEN_SHOWN)]
    sweep = pd.DataFrame({"epsilon": [1e-4, 1e-3] * 3, "nbeta": [10.0] * 6, "gamma": [1.0, 1.0, 10.0, 10.0, 100.0, 100.0],
                          "llc_final": [1.0, 2.0] * 3, "num_diverged": [0, 1] * 3})
    curve = pd.DataFrame({"step": [1, 2, 1, 2], "llc_mean": [1.0, 2.0, 1.5, 1.8], "llc_se": [0.1] * 4,
                          "seeding": [callbacks.SAME_SEED] * 2 + [callbacks.FRESH_SEED] * 2})
    with matplotlib.rc_context():
        pages.setup()
        figures = [plots.plot_golden_traces(estimates), plots.plot_failure_modes({"a": res, "b": res, "c": res}),
                   plots.plot_llc_over_training(curve), plots.plot_sweep(sweep),
                   *plots.sweep_figures({(1e-3, None, 1.0): res}).values()]
        assert figures[0].axes[0].get_ylabel() and len(figures[3].axes) == 4  # 3 panels in 2 rows of two
        for fig in figures:
            assert fig.get_size_inches()[0] <= PAGE_WIDTH + 1e-9
            fig.canvas.draw()
            sizes = [t.get_fontsize() for t in fig.findobj(Text) if t.get_visible() and t.get_text()]
            assert min(sizes) >= pages.MIN_FONT_PT, min(sizes)
            plt.close(fig)


def test_calibration_criteria_on_a_hand_built_sweep():
    """Flat in ε against the next smaller ε at the same nβ; MALA acceptance at least 0.8; no divergence; converged."""
    import pandas as pd
    from plateau_lib.llc import calibration, calibration_page
    sweep = pd.DataFrame({"epsilon": [1e-4, 1e-3, 1e-2, 1e-4, 1e-3], "nbeta": [10.0, 10.0, 10.0, 50.0, 50.0],
                          "gamma": 100.0, "llc_final": [5.0, 5.2, 7.0, 20.0, 21.0],
                          "mala_mean": [0.95, 0.9, 0.4, 0.95, 0.85], "num_diverged": [0, 0, 0, 0, 1],
                          "converged": True})
    checked = calibration.criteria(sweep)
    assert list(checked["flat in ε"]) == [False, True, False, False, True]
    assert list(checked["meets the criteria"]) == [False, True, False, False, False]
    assert calibration_page.criteria_summary(checked) == {
        "flat_tol": f"{calibration.FLAT_TOL:.0%}", "min_mala": f"{calibration.MIN_MALA}", "met_by": "ε = 0.001, nβ = 10",
        "llc_met": "5.2", "mala_range": "0.40–0.95", "not_flat": 3, "cells": 5, "met_but_mala": "ε = 0.001, nβ = 10"}
    none = calibration_page.criteria_summary(calibration.criteria(sweep.assign(mala_mean=0.3)))
    assert none["met_by"] == "no cell of this sweep" and none["mala_range"] == "0.30" and none["llc_met"] == pages.MISSING
    assert none["met_but_mala"] == "ε = 0.001, nβ = 10"  # MALA aside, the flat, undiverged, converged cell
    assert set(calibration_page.criteria_summary(None).values()) == {pages.MISSING}
    # the verdict box's answers: which cells meet the criteria, or which criterion no cell meets
    answers = calibration_page.calibration_answers({"the live sweep": checked, "a short sweep":
                                                    calibration.criteria(sweep.assign(mala_mean=0.3))})
    assert list(answers["answer"]) == ["yes: ε = 0.001, nβ = 10, γ = 100", "no: no cell has MALA acceptance ≥ 0.8"]
    assert answers["question"].iloc[0] == "Does a cell of the live sweep meet the page's criteria?"
    # a named cell's misses, e.g. a paper's own setting: [] where it meets all four, None where it was not swept
    assert calibration_page.missed_criteria(checked, 1e-3, 10.0, 100.0) == []
    assert calibration_page.missed_criteria(checked, 1e-2, 10.0, 100.0) == ["flat in ε", "MALA acceptance ≥ 0.8"]
    assert calibration_page.missed_criteria(checked, 1e-3, 50.0, 100.0) == ["no diverged chain"]
    assert calibration_page.missed_criteria(checked, 3e-3, 10.0, 100.0) is None
    assert calibration_page.missed_text(checked, SGLDConfig(epsilon=1e-3, nbeta=10.0, gamma=100.0)) == "none"
    assert calibration_page.missed_text(checked, SGLDConfig(epsilon=1e-2, nbeta=10.0, gamma=100.0)) == \
        "flat in ε; MALA acceptance ≥ 0.8"
    assert calibration_page.missed_text(None, SGLDConfig()) == pages.MISSING
    # one definition of flat in ε: the page's criteria and the step-size rule read it alike (the rule also takes
    # the smallest ε, which has no neighbour, as flat when healthy)
    flat = calibration.flat_in_epsilon(sweep.iloc[::-1])
    assert flat.isna().tolist() == [False, True, False, False, True] and flat.dropna().tolist() == [True, False, True]
    rule = calibration.mark_choice(sweep.assign(negative=False)).set_index(["nbeta", "epsilon"])
    assert rule.loc[(10.0, 1e-4), "flat"] and rule.loc[(10.0, 1e-3), "flat"] and not rule.loc[(10.0, 1e-2), "flat"]
    assert not rule.loc[(50.0, 1e-3), "flat"]  # flat in ε, but a chain diverged: not healthy


def test_the_committed_long_calibration_meets_the_criteria_where_the_live_sweep_cannot():
    """The LLC page's known result: with chains of 2,000 draws, ε = 1e-4 and 3e-4 at nβ = m / ln m meet all four
    criteria (λ̂ within 2 % of each other); at nβ = 100 no step size keeps MALA's acceptance at 0.8."""
    from plateau_lib.llc import calibration, presets
    from plateau_lib.plateau import llc_transformer
    table, meta = llc_transformer.long_calibration(presets.llc_page("cpu"))
    checked = calibration.criteria(table)
    met = checked[checked["meets the criteria"]]
    assert sorted(met["epsilon"]) == [1e-4, 3e-4] and (met["nbeta"] < 30).all()
    assert met["llc_final"].max() / met["llc_final"].min() < 1.02
    assert not checked.loc[checked["nbeta"] == 100.0, "MALA ok"].any()
    assert meta["device"] == "cpu" and len(table) == len(llc_transformer.long_calibration_cells())


def test_the_long_calibration_is_not_computed_unless_asked(tmp_path):
    from plateau_lib.engine import cache
    from plateau_lib.llc import presets
    from plateau_lib.plateau import llc_transformer
    with cache.using(cache.Store(tmp_path / "results", tmp_path / "local")):
        assert llc_transformer.long_calibration(presets.llc_page("cpu")) is None


def test_the_mala_ceiling_of_minibatch_noise_by_hand():
    """Two batch losses nβ·ΔL = ln 2 apart: the move toward the higher loss is accepted with probability 1/2, the
    other always, so the ceiling is 3/4; equal batches give 1; fewer than two losses are refused."""
    from plateau_lib.llc import calibration
    assert calibration.mala_ceiling([0.0, math.log(2) / 10.0], nbeta=10.0) == pytest.approx(0.75)
    assert calibration.mala_ceiling([1.3, 1.3, 1.3], nbeta=100.0) == 1.0
    with pytest.raises(ValueError, match="at least two batch losses"):
        calibration.mala_ceiling([1.0], nbeta=1.0)
    # batch_losses draws its batches from the data: a constant data set gives equal losses
    model = nn.Linear(3, 1)
    data = (torch.ones(50, 3), torch.zeros(50, 1))
    losses = calibration.batch_losses(model, lambda m, b: F.mse_loss(m(b[0]), b[1]), data, batch_size=8, batches=5)
    assert losses.shape == (5,) and np.ptp(losses) == 0.0


def test_the_batch_at_which_minibatch_noise_would_let_mala_pass():
    """normal_mala_ceiling agrees with mala_ceiling on normal batch losses (many pairs) and is 1 at no spread;
    batch_for_mala gives back the batch itself when its spread already puts the ceiling at the target, and four
    times the batch for twice that spread (the spread falls as 1/sqrt(batch)); a target outside (1/2, 1) is refused."""
    from plateau_lib.llc import calibration
    losses = np.random.default_rng(0).normal(1.0, 0.05, 400)
    assert calibration.normal_mala_ceiling(math.sqrt(2) * 60.0 * 0.05) == pytest.approx(
        calibration.mala_ceiling(losses, nbeta=60.0), abs=0.01)
    assert calibration.normal_mala_ceiling(0.0) == 1.0
    at_target = next(s for s in np.linspace(0.01, 5, 200_000) if calibration.normal_mala_ceiling(s) <= 0.8)
    std = at_target / (math.sqrt(2) * 60.0)
    assert calibration.batch_for_mala(std, 1024, 60.0, 0.8) == pytest.approx(1024, rel=1e-3)
    assert calibration.batch_for_mala(2 * std, 1024, 60.0, 0.8) == pytest.approx(4096, rel=1e-3)
    with pytest.raises(ValueError, match="target must be between"):
        calibration.batch_for_mala(std, 1024, 60.0, 0.4)


def test_a_stored_sweep_resumes_cell_by_cell_and_then_only_loads(tmp_path):
    """calibration.stored_sweep: a run stopped at its deadline keeps its finished cells (Stopped says so); the next
    computes only the rest (the point is loaded again, the kept cells are not redone); then it only loads."""
    from plateau_lib.engine import cache
    from plateau_lib.engine.train import Stopped
    from plateau_lib.llc import calibration
    loaded = []

    def point():
        loaded.append(1)
        data = regular_data(2, n=64)
        return least_squares_fit(RegularModel(2), data), mse_loss, data
    cells = [(1e-3, 10.0, 100.0), (3e-3, 10.0, 100.0)]
    sgld = SGLDConfig(num_chains=1, num_draws=20, num_burnin_steps=0, batch_size=16)
    with cache.using(cache.Store(tmp_path / "results", tmp_path / "local")):
        stored = cache.StoredTable("test_sweep", {"cells": cells})
        assert calibration.stored_sweep(stored, cells, point, sgld, "a test") is None and not loaded
        with pytest.raises(Stopped, match="after 1 test_sweep rows"):
            calibration.stored_sweep(stored, cells, point, sgld, "a test", compute=True, deadline=0.0, progress=False)
        table, meta = calibration.stored_sweep(stored, cells, point, sgld, "a test", compute=True, progress=False)
        assert list(table["cell"]) == [0, 1] and list(table["epsilon"]) == [1e-3, 3e-3]
        assert meta["what"] == "a test" and meta["device"] == "cpu" and len(loaded) == 2
        again, _ = calibration.stored_sweep(stored, cells, point, sgld, "a test", compute=True)
        assert again.equals(table) and len(loaded) == 2
