"""LLC estimator v2: the sequential and vmap backends give the same draws, stacked checkpoints give the
numbers of one checkpoint at a time, MALA is right in float64, bad input fails before sampling, and the
imports run one way."""
import ast
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
import torch.nn.functional as F

from plateau_lib.llc import SGLDConfig, estimate_llc, estimate_llc_stacked, llc_over_checkpoints, mala_acceptance_prob
from plateau_lib.llc.golden import RegularModel, least_squares_fit, mse_loss, regular_data
from plateau_lib.llc.sampler import make_generator
from plateau_lib.plateau.model import GPT, GPTConfig

torch.set_num_threads(1)
LLC_DIR = Path(__file__).resolve().parent.parent / "plateau_lib" / "llc"


def tiny_gpt(seed=0):
    torch.manual_seed(seed)
    return GPT(GPTConfig(vocab_size=7, block_size=6, n_layer=1, n_head=2, d_model=8))


def lm_loss(model, batch):
    x, y = batch
    return F.cross_entropy(model(x).flatten(0, 1), y.flatten())


def lm_data(n=64, seed=0):
    s = torch.randint(0, 7, (n, 7), generator=torch.Generator().manual_seed(seed))
    return s[:, :-1], s[:, 1:]


SG = SGLDConfig(epsilon=3e-3, nbeta=20.0, gamma=50.0, weight_decay=0.01, num_draws=12, num_burnin_steps=2,
                batch_size=16, seed=4)
KW = dict(device="cpu", warn=False)


# ------------------------------------------------------------------------------------------------ backends
@pytest.mark.parametrize("share", [False, True])
def test_backends_give_the_same_draws(share):
    """Same seed, same chain ids -> the same losses and MALA acceptances on either backend (float rounding)."""
    sgld = SG.replace(share_batches=share)
    runs = {b: estimate_llc(tiny_gpt(), lm_loss, lm_data(), sgld, chain_ids=[3, 1], mala=True, backend=b, **KW)
            for b in ("sequential", "vmap")}
    seq, vm = runs["sequential"], runs["vmap"]
    assert seq.hyperparams["backend"] == "sequential" and vm.hyperparams["backend"] == "vmap"
    np.testing.assert_allclose(seq.loss_trace_all, vm.loss_trace_all, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(seq.mala_accept, vm.mala_accept, rtol=1e-3, atol=1e-4)
    assert seq.llc_mean == pytest.approx(vm.llc_mean, rel=1e-4)
    assert not np.allclose(seq.loss_trace_all[0], seq.loss_trace_all[1])  # the chains differ
    auto = estimate_llc(tiny_gpt(), lm_loss, lm_data(), sgld, chain_ids=[3, 1], **KW)
    assert auto.hyperparams["backend"] == "sequential"  # auto on a CPU
    np.testing.assert_array_equal(auto.loss_trace_all, seq.loss_trace_all)


def test_own_batches_are_the_default_and_make_the_standard_error_honest():
    data = lm_data()
    res = estimate_llc(tiny_gpt(), lm_loss, data, SG.replace(num_chains=2), **KW)
    assert res.hyperparams["share_batches"] is False and res.independent_chains
    shared = estimate_llc(tiny_gpt(), lm_loss, data, SG.replace(num_chains=2, share_batches=True), **KW)
    assert not shared.independent_chains and not shared.summary()["independent_chains"]
    full = estimate_llc(tiny_gpt(), lm_loss, data, SGLDConfig(**{**SG.key_dict(), "batch_size": None, "num_chains": 2,
                                                                  "share_batches": True}), **KW)
    assert full.independent_chains  # full batch: nothing random is shared


# ------------------------------------------------------------------------------------------------ stacked checkpoints
def test_stacked_checkpoints_equal_one_at_a_time():
    """k checkpoints x C chains in one vmap computation: each checkpoint's own w*, the same seed at every
    checkpoint, and the numbers of one checkpoint at a time (either backend)."""
    checkpoints = {step: tiny_gpt(seed=step).state_dict() for step in (0, 1, 2)}
    kw = dict(progress=False, return_results=True, **KW)
    sgld = SG.replace(num_chains=3)
    stacked_table, stacked = llc_over_checkpoints(tiny_gpt(), lm_loss, lm_data(), checkpoints, sgld, stack=3,
                                                  backend="vmap", **kw)
    for backend in ("vmap", "sequential"):
        table, alone = llc_over_checkpoints(tiny_gpt(), lm_loss, lm_data(), checkpoints, sgld, stack=1,
                                            backend=backend, **kw)
        for step in checkpoints:
            np.testing.assert_allclose(stacked[step].loss_trace_all, alone[step].loss_trace_all, rtol=1e-5,
                                       atol=1e-6)
            assert stacked[step].init_loss == alone[step].init_loss
        np.testing.assert_allclose(stacked_table.llc_mean, table.llc_mean, rtol=1e-4)
    assert len({round(r.init_loss, 6) for r in stacked.values()}) == 3  # each checkpoint its own w*
    # a chain's draws do not depend on the chains and checkpoints beside it
    one = estimate_llc(tiny_gpt(seed=1), lm_loss, lm_data(), SG, chain_ids=[2], backend="vmap", **KW)
    np.testing.assert_allclose(one.loss_trace_all[0], stacked[1].loss_trace_all[2], rtol=1e-5, atol=1e-6)


def test_kept_rows_are_the_rows_of_one_call_and_an_interrupted_call_resumes_from_them(tmp_path, use_store):
    """With a stored table to keep them in, the rows equal those of a plain call; a second call estimates only the
    checkpoints the first did not reach (here: the first one was kept, then the call was interrupted)."""
    from plateau_lib.engine.cache import StoredTable
    use_store(committed=tmp_path / "committed", local=tmp_path / "local")
    checkpoints = {step: tiny_gpt(seed=step).state_dict() for step in (0, 1, 2)}
    kw = dict(progress=False, **KW)
    sgld = SG.replace(num_chains=2)
    plain = llc_over_checkpoints(tiny_gpt(), lm_loss, lm_data(), checkpoints, sgld, **kw)
    table, seen = StoredTable("demo_llc", {"demo": 1}), []

    def counted(model, batch):
        seen.append(1)
        if len(seen) > 1 and not table.rows().empty:  # the second checkpoint: the first row is kept, stop here
            raise KeyboardInterrupt
        return lm_loss(model, batch)
    with pytest.raises(KeyboardInterrupt):
        llc_over_checkpoints(tiny_gpt(), counted, lm_data(), checkpoints, sgld, kept=table, **kw)
    assert list(table.rows()["step"]) == [0]
    resumed = llc_over_checkpoints(tiny_gpt(), lm_loss, lm_data(), checkpoints, sgld, kept=table, **kw)
    cols = ["step", "llc_mean", "llc_se", "init_loss"]
    pd.testing.assert_frame_equal(resumed[cols], plain[cols], rtol=1e-9)
    with pytest.raises(ValueError, match="parameter 'kept' keeps rows"):
        llc_over_checkpoints(tiny_gpt(), lm_loss, lm_data(), checkpoints, sgld, kept=table, return_results=True, **kw)


# ------------------------------------------------------------------------------------------------ MALA in float64
def mala_reference(model, data, *, epsilon, nbeta, gamma, steps, seed, chain):
    """MALA acceptances of one full-batch chain by a plain float64 loop (the update of sampler.py)."""
    params = list(model.parameters())
    w_star = torch.nn.utils.parameters_to_vector(params).detach().clone()
    w = w_star.clone()
    noise_gen = make_generator(seed, chain, "noise", "cpu")
    prev, accept = None, []
    for _ in range(steps):
        torch.nn.utils.vector_to_parameters(w, params)
        loss = mse_loss(model, data)
        grad = torch.cat([g.reshape(-1) for g in torch.autograd.grad(loss, params)])
        drift = nbeta * grad + gamma * (w - w_star)
        U = nbeta * loss.detach() + 0.5 * gamma * ((w - w_star) ** 2).sum()
        if prev is not None:
            accept.append(float(mala_acceptance_prob(*prev, w, drift, U, epsilon)))
        prev = (w.clone(), drift.clone(), U.clone())
        w = w - 0.5 * epsilon * drift + math.sqrt(epsilon) * torch.empty_like(w).normal_(generator=noise_gen)
    return np.array(accept)


@pytest.mark.parametrize("backend", ["sequential", "vmap"])
def test_mala_is_right_for_a_float64_model(backend):
    data = tuple(t.double() for t in regular_data(3, 1, n=200, seed=0))
    model = least_squares_fit(RegularModel(3), regular_data(3, 1, n=200, seed=0)).double()
    hp = dict(epsilon=2e-3, nbeta=30.0, gamma=5.0)
    res = estimate_llc(model, mse_loss, data, SGLDConfig(num_chains=2, num_draws=25, seed=1, **hp), mala=True,
                       backend=backend, device="cpu", warn=False)
    assert res.loss_trace_all.dtype == np.float64
    for c in range(2):
        ref = mala_reference(least_squares_fit(RegularModel(3), regular_data(3, 1, n=200, seed=0)).double(), data,
                             steps=25, seed=1, chain=c, **hp)
        np.testing.assert_allclose(res.mala_accept[c], ref, rtol=1e-9, atol=1e-12)
    assert 0.2 < res.mala_mean < 1.0  # informative: neither all accepted nor all rejected


# ------------------------------------------------------------------------------------------------ bad input
def never_called(model, batch):
    raise AssertionError("the loss was evaluated: validation came too late")


@pytest.mark.parametrize("kwargs,word", [
    (dict(backend="gpu"), "backend"), (dict(backend=None), "backend"), (dict(chain_ids=[1, 1]), "chain_ids"),
    (dict(tf32=True), "tf32"), (dict(cuda_graphs=True), "cuda_graphs"), (dict(runaway_sds=0.0), "runaway_sds"),
    (dict(mala=True, sgld=SGLDConfig(num_draws=3, sampler="rmsprop_sgld")), "mala"),
])
def test_bad_input_raises_before_sampling(kwargs, word):
    kwargs = {"sgld": SGLDConfig(num_draws=3), "device": "cpu", **kwargs}
    with pytest.raises(ValueError, match=word):
        estimate_llc(tiny_gpt(), never_called, lm_data(), **kwargs)


SHORT = SGLDConfig(num_draws=3)


def test_bad_stacks_raise_before_sampling():
    wide = GPT(GPTConfig(vocab_size=7, block_size=6, n_layer=1, n_head=2, d_model=16))
    with pytest.raises(ValueError, match="shapes"):
        estimate_llc_stacked([tiny_gpt(), wide], never_called, lm_data(), SHORT, device="cpu", backend="vmap")
    frozen = tiny_gpt()
    next(frozen.parameters()).requires_grad_(False)
    with pytest.raises(ValueError, match="shapes"):
        estimate_llc_stacked([tiny_gpt(), frozen], never_called, lm_data(), SHORT, device="cpu")
    with pytest.raises(ValueError, match="models"):
        estimate_llc_stacked([], never_called, lm_data(), SHORT, device="cpu")
    for stack in (0, 1.5):
        with pytest.raises(ValueError, match="stack"):
            llc_over_checkpoints(tiny_gpt(), never_called, lm_data(), {0: tiny_gpt().state_dict()}, SHORT, stack=stack)


# ------------------------------------------------------------------------------------------------ imports
def llc_imports(name):
    tree = ast.parse((LLC_DIR / f"{name}.py").read_text())
    prefix = "plateau_lib.llc."
    return {node.module[len(prefix):] for node in ast.walk(tree)
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith(prefix)}


def test_imports_run_one_way():
    assert llc_imports("result") == set()
    assert llc_imports("plots") == {"result"}
    assert llc_imports("config") == {"sampler"}
    assert llc_imports("calibration") == {"config", "estimator", "result"}
    assert "plots" not in llc_imports("estimator") | llc_imports("calibration") | llc_imports("callbacks")
    init = (LLC_DIR / "__init__.py").read_text()
    assert "__getattr__" not in init
    code = "import sys, plateau_lib.llc; assert 'matplotlib' not in sys.modules; from plateau_lib.llc import plots"
    subprocess.run([sys.executable, "-c", code], check=True)
