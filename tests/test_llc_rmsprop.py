"""RMSProp-SGLD (plateau_lib.llc.sampler, ``sampler="rmsprop_sgld"``): the preconditioned step by hand, its draws on
both backends, λ̂ → d/2 on a regular model, and its bad input."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from plateau_lib.llc import SGLDConfig, estimate_llc
from plateau_lib.llc.dln import dln_data, dln_lambda, dln_truth, true_parameter
from plateau_lib.llc.golden import mse_loss
from plateau_lib.llc.sampler import RMSPROP_ALPHA, RMSPROP_DELTA, SGLDStep

from test_llc_backends import KW, SG, lm_data, lm_loss, tiny_gpt

torch.set_num_threads(1)


def test_two_preconditioned_steps_by_hand():
    """w = (1, −2), w* = 0, ε = 0.01, nβ = 3, γ = 2; loss gradients g₁ = (0.5, 2), g₂ = (−1, 0.1); noise ξ₁, ξ₂.
    V₁ = (1 − α) g₁², P₁ = 1 / (√V₁ + δ), w₁ = w − ε/2 · P₁ (nβ g₁ + γ w) + √(ε P₁) ξ₁; then V₂ = α V₁ + (1 − α) g₂²
    and the same from w₁. Written out here in plain float64 arithmetic, not through the sampler's code."""
    eps, nbeta, gamma, a, d = 0.01, 3.0, 2.0, RMSPROP_ALPHA, RMSPROP_DELTA
    g = [np.array([0.5, 2.0]), np.array([-1.0, 0.1])]
    xi = [np.array([0.3, -1.2]), np.array([-0.7, 0.4])]
    w_hand, v = np.array([1.0, -2.0]), np.zeros(2)
    for gt, xt in zip(g, xi):
        v = a * v + (1 - a) * gt ** 2
        p = 1 / (np.sqrt(v) + d)
        w_hand = w_hand - eps / 2 * p * (nbeta * gt + gamma * w_hand) + np.sqrt(eps * p) * xt
    step = SGLDStep(eps, nbeta, gamma, 0.0, rmsprop=True)
    w, w_star = [torch.tensor([1.0, -2.0], dtype=torch.float64)], [torch.zeros(2, dtype=torch.float64)]
    step.start(w)
    for gt, xt in zip(g, xi):
        grads = [torch.tensor(gt)]
        step.move(w, step.drift(w, grads, w_star), [torch.tensor(xt)], grads)
    np.testing.assert_allclose(w[0].numpy(), w_hand, rtol=1e-12)
    # the first step alone: V₁ = 0.01 g₁², so P₁ = 1 / (0.1 |g₁| + 0.1)
    assert 1 / (math.sqrt((1 - a) * 0.25) + d) == pytest.approx(1 / 0.15)


def test_plain_sgld_is_the_unpreconditioned_step():
    step = SGLDStep(0.01, 3.0, 2.0, 0.0)
    w, w_star = [torch.tensor([1.0, -2.0], dtype=torch.float64)], [torch.zeros(2, dtype=torch.float64)]
    step.start(w)
    grads = [torch.tensor([0.5, 2.0], dtype=torch.float64)]
    step.move(w, step.drift(w, grads, w_star), [torch.tensor([0.3, -1.2], dtype=torch.float64)], grads)
    expected = np.array([1.0, -2.0]) - 0.005 * (3 * np.array([0.5, 2.0]) + 2 * np.array([1.0, -2.0])) \
        + 0.1 * np.array([0.3, -1.2])
    np.testing.assert_allclose(w[0].numpy(), expected, rtol=1e-12)


def test_backends_give_the_same_rmsprop_draws():
    sgld = SG.replace(epsilon=3e-4)
    runs = {b: estimate_llc(tiny_gpt(), lm_loss, lm_data(), sgld.replace(sampler="rmsprop_sgld"), chain_ids=[3, 1],
                            backend=b, **KW) for b in ("sequential", "vmap")}
    np.testing.assert_allclose(runs["sequential"].loss_trace_all, runs["vmap"].loss_trace_all, rtol=1e-5, atol=1e-6)
    plain = estimate_llc(tiny_gpt(), lm_loss, lm_data(), sgld, chain_ids=[3, 1], **KW)
    assert not np.allclose(plain.loss_trace_all[:, 3:], runs["sequential"].loss_trace_all[:, 3:])
    assert runs["vmap"].hyperparams["sampler"] == "rmsprop_sgld"


def test_rmsprop_sgld_finds_half_the_dimension_of_a_regular_model():
    """One linear layer 3 → 2 at its true parameter is regular: λ = d/2 = 3. Measured: λ̂ ÷ λ = 1.05 ± 0.03 at
    ε = 1e-6 (about 5 s); ε = 3e-6 gives 1.09 (the discretization bias grows with ε)."""
    widths, rank = [3, 2], 2
    sgld = SGLDConfig(epsilon=1e-6, nbeta=1e4, gamma=10.0, num_chains=4, num_draws=6000, num_burnin_steps=3000,
                      sampler="rmsprop_sgld")
    res = estimate_llc(true_parameter(widths, rank), mse_loss, dln_data(widths, dln_truth(widths, rank), n=500), sgld,
                       init_loss=0.0, device="cpu", warn=False)
    assert dln_lambda(widths, rank) == 3.0
    assert res.llc_mean / 3.0 == pytest.approx(1.0, abs=0.1)


@pytest.mark.parametrize("sampler, run, word", [("adam", {}, "sampler must be one of"),
                                               ("rmsprop_sgld", {"mala": True}, "mala=True")])
def test_bad_sampler_input_raises_before_sampling(sampler, run, word):
    with pytest.raises(ValueError, match=word):
        estimate_llc(tiny_gpt(), lm_loss, lm_data(), SG.replace(sampler=sampler), **KW, **run)
