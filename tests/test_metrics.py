"""Each metric on hand-built inputs with known answers."""
import math

import torch

from plateau_lib import metrics as M
from plateau_lib.tasks import make_task

MWS = make_task("mws")


def test_repetition_frequency_by_hand():
    out = torch.tensor([[1, 1, 1, 2], [3, 4, 5, 6]])
    assert math.isclose(M.repetition_frequency(out).item(), (2 / 3 + 0) / 2, rel_tol=1e-6)


def test_data_repetition_matches_closed_form():
    rho = M.data_repetition(MWS, torch.Generator().manual_seed(0), n=20000).item()
    assert abs(rho - 14 / 15 / 16) < 0.004  # P(y_i = y_{i+1}) = 1/16 for i >= 2, 0 for (y_1, y_2)


def test_sequence_entropy_by_hand():
    assert math.isclose(M.sequence_entropy(torch.tensor([[1, 1, 2, 2]]), 18).item(), math.log(2), rel_tol=1e-6)
    assert M.sequence_entropy(torch.tensor([[5, 5, 5, 5]]), 18).item() == 0.0
    assert math.isclose(M.sequence_entropy(torch.tensor([[0, 1, 2, 3]]), 18).item(), math.log(4), rel_tol=1e-6)


def test_losses_at_uniform_logits_are_log_vocab():
    seqs = MWS.sample(8, torch.Generator().manual_seed(0))
    logits = torch.zeros(8, 32, 18)
    assert math.isclose(M.loss_all(logits, seqs).item(), math.log(18), rel_tol=1e-6)
    assert math.isclose(M.loss_outputs(logits, seqs, MWS).item(), math.log(18), rel_tol=1e-6)
    # outputs right, inputs uniform: only the output positions lose nothing
    logits[:, 16:] = -30.0
    logits[torch.arange(8)[:, None], torch.arange(16, 32), seqs[:, 17:]] = 30.0
    assert M.loss_outputs(logits, seqs, MWS).item() < 1e-6
    assert math.isclose(M.loss_all(logits, seqs).item(), 16 * math.log(18) / 32, rel_tol=1e-4)


def test_cosine_excludes_the_partial_solution_position():
    hidden = torch.zeros(2, 32, 4)
    hidden[:, 17:, 0] = 1.0          # positions predicting y_2..y_16: identical direction
    hidden[:, 16, 1] = 1.0           # SEP position (predicts y_1): orthogonal to all of them
    cos = M.cosine_matrix(hidden, MWS)
    assert cos.shape == (16, 16) and torch.allclose(cos.diagonal(), torch.ones(16))
    assert cos[0, 1:].abs().max() == 0 and torch.allclose(cos[1:, 1:], torch.ones(15, 15))
    assert M.mean_cosine(cos, MWS).item() == 1.0   # the paper's /105 average ignores column 0
    hidden[1, 20, 0] = -1.0          # one antiparallel vector in one sequence
    cos = M.cosine_matrix(hidden, MWS)
    assert math.isclose(cos[4, 1].item(), 0.0, abs_tol=1e-7)  # (+1 + -1) / 2


def test_apm_by_hand():
    seqs = MWS.sample(2, torch.Generator().manual_seed(0))
    omega = MWS.omega(seqs)[0]
    attn = torch.zeros(2, 1, 32, 32)
    attn[:, 0, omega] = -2.0  # all mass on Ω (negative scores count by magnitude)
    assert M.attention_progress(attn, seqs, MWS).item() == 1.0
    attn = torch.tril(torch.ones(32, 32)).expand(2, 1, 32, 32).clone()
    total = sum(q + 1 for q in range(16, 32))           # causal entries in query rows 16..31
    assert math.isclose(M.attention_progress(attn, seqs, MWS).item(), 31 / total, rel_tol=1e-6)
    attn[0] *= 3.0  # the ratio is per sequence, so scaling one sequence changes nothing
    assert math.isclose(M.attention_progress(attn, seqs, MWS).item(), 31 / total, rel_tol=1e-6)


def test_position_accuracy_and_teacher_forcing():
    pred = torch.tensor([[1, 2, 3], [1, 0, 3]])
    true = torch.tensor([[1, 2, 0], [1, 2, 3]])
    assert M.position_accuracy(pred, true).tolist() == [1.0, 0.5, 0.5]
    logits = torch.zeros(1, 32, 18)
    logits[0, 16:, 7] = 1.0
    assert (M.teacher_forced_outputs(logits, MWS) == 7).all()


def test_bias_mask_scales_omega_without_the_first_row():
    mask = M.bias_mask(MWS, 10.0)[0, 0]
    assert int((mask == 10.0).sum()) == 30 and mask[16, 0] == 1.0
    assert int((M.bias_mask(MWS, 10.0, include_first=True)[0, 0] == 10.0).sum()) == 31
