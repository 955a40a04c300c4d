"""Our estimate and devinterp v1.3.2's agree on a small transformer at equal hyperparameters.

devinterp is a test/benchmark-only reference; plateau_lib never imports it. Both get the same trained
model, data, step size, nbeta, localization, chains, draws and init loss (the full-data loss at w*,
passed to devinterp as ``init_loss``); each chain shuffles its own batches in both (our
``share_batches=False`` = v1's per-chain DataLoader). Agreement: within 2 combined standard errors.
"""
import math

import pytest
import torch
import torch.nn.functional as F

from plateau_lib.engine.tasks import make_task
from plateau_lib.llc import SGLDConfig, estimate_llc
from plateau_lib.plateau.model import GPT, GPTConfig

devinterp_sampler = pytest.importorskip("devinterp.slt.sampler")
from devinterp.optim.sgld import SGLD  # noqa: E402

torch.set_num_threads(1)


def lm_loss(model, batch):
    x, y = batch
    return F.cross_entropy(model(x).flatten(0, 1), y.flatten())


@pytest.fixture(scope="module")
def trained():
    task = make_task("mws")
    g = torch.Generator().manual_seed(0)
    seqs = task.sample(384, g)
    data = (seqs[:, :-1], seqs[:, 1:])
    torch.manual_seed(0)
    model = GPT(GPTConfig(vocab_size=task.vocab_size, block_size=task.block_size, n_layer=1, n_head=1, d_model=16))
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    for step in range(200):  # full batch, to get near a minimum of this fixed data set
        opt.zero_grad()
        lm_loss(model, data).backward()
        opt.step()
    with torch.no_grad():
        init_loss = lm_loss(model, data).item()
    return model, data, init_loss


def test_agrees_with_devinterp_v1(trained):
    model, data, init_loss = trained
    hp = dict(epsilon=1e-3, nbeta=20.0, gamma=100.0)
    chains, draws, batch = 8, 150, 64
    sgld = SGLDConfig(num_chains=chains, num_draws=draws, batch_size=batch, seed=0, share_batches=False, **hp)
    ours = estimate_llc(model, lm_loss, data, sgld, init_loss=init_loss, device="cpu")
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(*data), batch_size=batch, shuffle=True)
    theirs = devinterp_sampler.estimate_learning_coeff_with_summary(
        model, loader, evaluate=lm_loss, sampling_method=SGLD,
        optimizer_kwargs=dict(lr=hp["epsilon"], nbeta=hp["nbeta"], localization=hp["gamma"]),
        num_chains=chains, num_draws=draws, init_loss=init_loss, seed=0, device="cpu", verbose=False)
    their_mean, their_se = float(theirs["llc/mean"]), float(theirs["llc/std"]) / math.sqrt(chains)
    assert not ours.diverged.any()
    assert ours.llc_mean > 0 and their_mean > 0
    combined = math.hypot(ours.llc_se, their_se)
    assert abs(ours.llc_mean - their_mean) < 2 * combined, (ours.llc_mean, ours.llc_se, their_mean, their_se)
    # the estimates are not trivially equal because both are uncertain: the standard errors are informative
    assert combined < 0.2 * abs(their_mean)
