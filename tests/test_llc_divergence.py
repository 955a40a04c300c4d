"""The divergence rule (plateau_lib.llc.result): runaway chains are flagged even when finite, healthy ones never."""
import numpy as np
import pytest
import torch
import torch.nn.functional as F

from plateau_lib.llc import LLCWarning, SGLDConfig
from plateau_lib.llc.failure_modes import planted_runaway
from plateau_lib.llc.golden import golden_estimates
from plateau_lib.llc.result import diverged_chains, summarize
from plateau_lib.plateau.model import GPT, GPTConfig

torch.set_num_threads(1)


def per_chain_rule(values, loss=None, init_loss=0.0, bound_scale=1e9):
    values = np.asarray(values, dtype=float)
    loss = np.zeros((len(values), 3)) if loss is None else loss
    return diverged_chains(loss, values, init_loss, bound_scale).tolist()


def test_the_rule_by_hand():
    # median 10, MAD 0.2 -> robust SD 0.2965, floored at 0.1 x 10 = 1: flagged above 10 + 5 x 1 = 15
    assert per_chain_rule([9.8, 10.0, 10.2, 15.5]) == [False, False, False, True]
    assert per_chain_rule([9.8, 10.0, 10.2, 14.9]) == [False, False, False, False]
    # a wide spread: median 13, MAD 3 -> robust SD 4.45, flagged above 35.2
    assert per_chain_rule([7.0, 10.0, 13.0, 16.0, 36.0]) == [False, False, False, False, True]
    assert per_chain_rule([7.0, 10.0, 13.0, 16.0, 35.0]) == [False] * 5
    # only upward: a chain that found lower loss escaped, it did not run away
    assert per_chain_rule([9.8, 10.0, 10.2, -50.0]) == [False] * 4
    # near zero the floor is 0.1 (lambda-hat units), not 10 % of a tiny median
    assert per_chain_rule([0.01, 0.02, 0.03, 0.4]) == [False] * 4
    assert per_chain_rule([0.01, 0.02, 0.03, 0.6]) == [False, False, False, True]
    # fewer than 3 finite chains: nothing to compare with; NaN and the loss bound still apply
    assert per_chain_rule([1.0, 100.0]) == [False, False]
    loss = np.array([[0.0, 1.0, np.nan], [0.0, 1.0, 1.0], [0.0, 50.0, 1.0]])
    assert per_chain_rule([np.nan, 1.0, 1.0], loss, bound_scale=4.0) == [True, False, True]


def test_summarize_excludes_a_runaway_chain_with_a_warning():
    loss = np.array([[1.0, 1.1, 1.2], [1.0, 1.2, 1.1], [1.0, 1.1, 1.1], [1.0, 4.0, 6.0]])
    hyper = dict(nbeta=10.0, num_burnin_steps=0, num_steps_bw_draws=1, num_draws=3, num_params=1000)
    with pytest.warns(LLCWarning, match="1 of 4 chains diverged.*robust"):
        res = summarize(loss, 1.0, hyper, [0, 1, 2, 3], 1.0)
    assert res.diverged.tolist() == [False, False, False, True]
    assert res.llc_mean == pytest.approx(10 * np.mean([0.1, 0.1, 0.2 / 3]))


def tiny_gpt():
    torch.manual_seed(0)
    return GPT(GPTConfig(vocab_size=7, block_size=6, n_layer=1, n_head=2, d_model=8))


def lm_loss(model, batch):
    x, y = batch
    return F.cross_entropy(model(x).flatten(0, 1), y.flatten())


def test_planted_runaway_chain_is_flagged_though_finite():
    """Four chains at ε = 1e-3 and one at ε = 0.05 on a small GPT: the fifth runs away (λ̂ about 3x the
    others) without a NaN and far below the loss bound, and is flagged and excluded with a warning."""
    s = torch.randint(0, 7, (256, 7), generator=torch.Generator().manual_seed(0))
    sgld = SGLDConfig(epsilon=1e-3, gamma=50.0, nbeta=20.0, num_chains=5, num_draws=40, batch_size=32, seed=0)
    with pytest.warns(LLCWarning, match="1 of 5 chains diverged"):
        res = planted_runaway(tiny_gpt(), lm_loss, (s[:, :-1], s[:, 1:]), sgld, 0.05, device="cpu")
    assert res.diverged.tolist() == [False] * 4 + [True]
    assert np.isfinite(res.loss_trace_all).all()
    scale = max(abs(res.init_loss), res.hyperparams["num_params"] / (2 * sgld.nbeta))
    assert res.loss_trace_all.max() < res.init_loss + 10 * scale  # the old rule would have averaged it in
    assert res.llc_per_chain[4] > 2 * np.median(res.llc_per_chain[:4])
    assert res.llc_mean == pytest.approx(res.llc_per_chain[:4].mean())


def test_healthy_golden_chains_are_never_flagged():
    estimates = golden_estimates({"golden_draws": 60, "golden_chains": 8, "golden_train_steps": 1000}, seed=1)
    for e in estimates:
        assert e.result.num_ok == e.result.hyperparams["num_chains"], (e.label, e.result.llc_per_chain)
