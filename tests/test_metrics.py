"""Each metric on hand-built inputs with known answers."""
import math
import types

import pytest
import torch

from plateau_lib.engine.runs import TrainConfig
from plateau_lib.engine.tasks import make_task
from plateau_lib.plateau import metrics as M

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
    assert M.mean_cosine(cos, MWS.cosine_pairs).item() == 1.0   # the paper's /105 average ignores column 0
    hidden[1, 20, 0] = -1.0          # one antiparallel vector in one sequence
    cos = M.cosine_matrix(hidden, MWS)
    assert math.isclose(cos[4, 1].item(), 0.0, abs_tol=1e-7)  # (+1 + -1) / 2


def test_concat_mws_cosine_segments_are_the_papers_column_sums():
    """cosine_1..3 against train_mws_concat.py transcribed: with logit_cs the strict lower triangle of the
    13 x 13 matrix, Σ logit_cs[:, :4] / 42, Σ logit_cs[:, 4:9] / 30 and Σ logit_cs[:, 9:] / 6."""
    task = make_task("concat_mws")
    a = torch.rand(13, 13, generator=torch.Generator().manual_seed(0))
    cos = a + a.T
    logit_cs = torch.tril(cos, diagonal=-1)
    paper = {"cosine_1": logit_cs[:, :4].sum() / 42, "cosine_2": logit_cs[:, 4:9].sum() / 30,
             "cosine_3": logit_cs[:, 9:].sum() / 6}
    assert list(task.cosine_segments) == list(paper)
    for name, value in paper.items():
        assert math.isclose(M.mean_cosine(cos, task.cosine_segments[name]).item(), value.item(), rel_tol=1e-6), name
    assert math.isclose(M.mean_cosine(cos, task.cosine_pairs).item(), logit_cs.sum().item() / 78, rel_tol=1e-6)


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


# --- evaluate() end to end on hand-built models --------------------------------------------------------------

class MWSOracle(torch.nn.Module):
    """Stands in for GPT in ``evaluate`` (same forward/generate signature) with hand-set outputs for MWS (k=2).

    Logits: the inputs x_2..x_n are unpredictable, so positions 0..n-2 are uniform over 1..n; position n-1
    predicts SEP; from the SEP on, ``mode="solve"`` predicts y_{j+1} exactly (y_1 = x_1, y_i = x_{i-1} + x_i
    mod p, read from the model's own input), ``mode="repeat"`` predicts x_1 at SEP and then its own previous
    token (the collapsed, repeating solution). Attention: ``w_omega`` on the hand-listed Ω of MWS (SEP -> x_1;
    the query predicting y_i -> x_{i-1}, x_i), ``w_other`` on every other causal entry, times ``attn_bias``.
    Hidden state ("final_ln"): the one-hot of the predicted token.
    """

    def __init__(self, task, mode="solve", w_omega=1.0, w_other=1.0):
        super().__init__()
        self.cfg = types.SimpleNamespace(n_layer=1)  # evaluate reads cfg.n_layer for its caches
        self.task, self.mode, self.w_omega, self.w_other = task, mode, w_omega, w_other

    def next_token(self, idx):
        n, p = self.task.n, self.task.p
        x = idx[:, :n]
        pred = torch.zeros_like(idx)
        pred[:, n - 1] = p
        if idx.shape[1] > n:
            if self.mode == "solve":
                y = x.clone()
                y[:, 1:] = (x[:, :-1] + x[:, 1:]) % p
                pred[:, n:] = y[:, : idx.shape[1] - n]
            else:
                pred[:, n] = x[:, 0]
                pred[:, n + 1:] = idx[:, n + 1:]
        return pred

    def forward(self, idx, attn_bias=None, return_internals=False, caches=None):
        B, T = idx.shape
        n, V = self.task.n, self.task.vocab_size
        pred = self.next_token(idx)
        if caches is not None:  # a stand-in cache, so evaluate can slice it; generate recomputes anyway
            caches[0]["k"] = caches[0]["v"] = torch.zeros(B, 1, T, 1)
        logits = torch.full((B, T, V), -30.0)
        logits[:, n - 1:] = -30.0 + 60.0 * torch.nn.functional.one_hot(pred[:, n - 1:], V)
        logits[:, : n - 1, 1: n + 1] = 0.0
        if not return_internals:
            return logits
        att = torch.tril(torch.ones(T, T)) * self.w_other
        att[n, 0] = self.w_omega
        for i in range(1, n):
            if n + i < T:
                att[n + i, [i - 1, i]] = self.w_omega
        att = att.expand(B, 1, T, T)
        if attn_bias is not None:
            att = att * attn_bias[..., :T, :T]
        hidden = torch.nn.functional.one_hot(pred, V).float()
        return logits, {"attn": [att], "final_ln": hidden, "embed": hidden}

    @torch.no_grad()
    def generate(self, prompt, n_new, attn_bias=None, caches=None, logits=None):  # recomputes; ignores caches
        out = prompt
        for _ in range(n_new):
            out = torch.cat([out, self(out, attn_bias=attn_bias)[:, -1].argmax(-1, keepdim=True)], 1)
        return out


class FixedInternals(torch.nn.Module):
    """Stands in for GPT in ``evaluate``: uniform logits, with hand-set attention scores per layer (each (T, T))
    and final hidden states (T, d), the same for every sequence; generation emits zeros."""

    def __init__(self, task, attn, hidden):
        super().__init__()
        self.cfg = types.SimpleNamespace(n_layer=len(attn))
        self.task, self.attn, self.hidden = task, attn, hidden

    def forward(self, idx, attn_bias=None, return_internals=False, caches=None):
        B, T = idx.shape
        if caches is not None:  # a stand-in cache, so evaluate can slice it
            for cache in caches:
                cache["k"] = cache["v"] = torch.zeros(B, 1, T, 1)
        logits = torch.zeros(B, T, self.task.vocab_size)
        if not return_internals:
            return logits
        return logits, {"attn": [a[:T, :T].expand(B, 1, T, T) for a in self.attn],
                        "final_ln": self.hidden[:T].expand(B, T, -1)}

    def generate(self, prompt, n_new, attn_bias=None, caches=None, logits=None):
        return torch.cat([prompt, prompt.new_zeros(prompt.shape[0], n_new)], 1)


def test_histogram_apm_reads_layer_one_where_omega_is_defined(gen):
    """The paper defines the histogram's Ω on layer 1 of its 2-layer model (att_prog_measure1: the query
    predicting y_j reads x_j): layer-1 attention equal to Ω gives APM 1, whatever the last layer does."""
    task = make_task("histogram")
    seqs = task.sample(4, gen)
    T = task.block_size
    layer1 = torch.zeros(T, T)
    for j in range(16):
        layer1[16 + j, j] = 1.0               # query 16 + j predicts y_{j+1} = count(x_{j+1}) and reads x_{j+1}
    layer2 = torch.tril(torch.ones(T, T))     # every causal key alike: APM 16 / 392 were it read
    out = M.evaluate(FixedInternals(task, [layer1, layer2], torch.ones(T, 4)), seqs, task)
    assert out["apm"].item() == 1.0
    assert torch.equal(out["attn"], layer1)   # the stored map is the layer the APM reads
    assert M.evaluate(FixedInternals(task, [layer1], torch.ones(T, 4)), seqs, task)["apm"].item() == 1.0  # 1 layer


def test_concat_mws_cosines_by_hand(gen):
    """Hidden states by segment: e0 at the 4 positions predicting the copies (16..19), e1 at the 5 predicting the
    pair sums (20..24), e0 + e1 at the 4 predicting the triple sums (25..28). Column segment 1 holds 6 pairs
    inside segment 1 (cos 1), 20 with a segment-2 row (cos 0) and 16 with a segment-3 row (cos 1/√2); column
    segment 2 holds 10 pairs inside (cos 1) and 20 with a segment-3 row (1/√2); column segment 3 holds 6 (1)."""
    task = make_task("concat_mws")
    hidden = torch.ones(task.block_size, 2)
    hidden[16:20] = torch.tensor([1.0, 0.0])
    hidden[20:25] = torch.tensor([0.0, 1.0])
    r = 1 / math.sqrt(2)
    out = M.evaluate(FixedInternals(task, [torch.ones(task.block_size, task.block_size)], hidden),
                     task.sample(4, gen), task)
    expect = {"cosine_1": (6 + 16 * r) / 42, "cosine_2": (10 + 20 * r) / 30, "cosine_3": 1.0,
              "cosine": (22 + 36 * r) / 78}   # all 78 pairs pooled
    for name, value in expect.items():
        assert math.isclose(out[name].item(), value, rel_tol=1e-6), name
    metrics, _, _ = task.tables([(0, out)], seed=0)
    assert list(metrics.columns[-3:]) == ["cosine_1", "cosine_2", "cosine_3"]
    assert make_task("mws").scalars == M.SCALARS   # tasks without segments keep the chapter's table


def _rho_by_hand(outputs):
    """Mean over sequences of the share of equal adjacent output pairs."""
    return sum(sum(a == b for a, b in zip(o, o[1:])) / (len(o) - 1) for o in outputs) / len(outputs)


def _entropy_by_hand(outputs):
    from collections import Counter
    return sum(-sum(c / len(o) * math.log(c / len(o)) for c in Counter(o).values()) for o in outputs) / len(outputs)


def test_evaluate_on_an_oracle_model():
    seqs = MWS.sample(64, torch.Generator().manual_seed(3))
    ys = seqs[:, 17:].tolist()
    out = M.evaluate(MWSOracle(MWS), seqs, MWS)
    for key in ("acc", "acc_tf", "acc_first", "acc_rest"):
        assert out[key].item() == 1.0, key
    assert out["acc_pos"].tolist() == [1.0] * 16 and out["acc_tf_pos"].tolist() == [1.0] * 16
    assert out["loss_out"].item() < 1e-6
    # 15 unpredictable inputs at ln 16 each, the SEP and the 16 outputs free: the MWS loss floor
    assert math.isclose(out["loss"].item(), 15 * math.log(16) / 32, rel_tol=1e-5)
    assert math.isclose(out["loss"].item(), M.MWS_LOSS_FLOOR, rel_tol=1e-5)
    rho = _rho_by_hand(ys)
    assert 0 < rho < 0.2
    assert math.isclose(out["rho"].item(), rho, rel_tol=1e-6)
    assert math.isclose(out["rho_data"].item(), rho, rel_tol=1e-6)
    ent = _entropy_by_hand(ys)
    assert math.isclose(out["entropy"].item(), ent, rel_tol=1e-5)
    assert math.isclose(out["entropy_data"].item(), ent, rel_tol=1e-5)
    # one-hot hidden states: cos(h_a, h_b) = [y_{a+1} == y_{b+1}]; the paper's mean runs over 1 <= b < a <= 15
    pairs = [(a, b) for a in range(1, 16) for b in range(1, a)]
    cos = sum(sum(y[a] == y[b] for y in ys) / len(ys) for a, b in pairs) / len(pairs)
    assert len(pairs) == 105 and math.isclose(out["cosine"].item(), cos, rel_tol=1e-5)
    # APM with equal weight everywhere: |Ω| = 31 of the 17 + 18 + ... + 32 = 392 causal entries in rows 16..31
    assert math.isclose(out["apm"].item(), 31 / 392, rel_tol=1e-6)
    assert out["attn"].shape == (32, 32) and torch.equal(out["attn"], torch.tril(torch.ones(32, 32)))


def test_evaluate_apm_with_hand_set_attention():
    seqs = MWS.sample(8, torch.Generator().manual_seed(4))
    assert M.evaluate(MWSOracle(MWS, w_omega=-3.0, w_other=0.0), seqs, MWS)["apm"].item() == 1.0
    w = 4.0  # Ω at weight 4 against 392 - 31 = 361 entries at weight 1
    assert math.isclose(M.evaluate(MWSOracle(MWS, w_omega=w), seqs, MWS)["apm"].item(), 31 * w / (31 * w + 361),
                        rel_tol=1e-6)
    # evaluate passes attn_bias to the forward pass: the 30 Ω entries outside the SEP row are scaled by c
    c = 10.0
    out = M.evaluate(MWSOracle(MWS), seqs, MWS, attn_bias=M.bias_mask(MWS, c))
    assert math.isclose(out["apm"].item(), (1 + 30 * c) / (1 + 30 * c + 361), rel_tol=1e-6)
    assert out["acc"].item() == 1.0


def test_evaluate_separates_greedy_from_teacher_forced():
    """A model that outputs x_1 and then repeats its previous token: greedy repeats x_1 forever, while under
    teacher forcing it copies the true previous output."""
    seqs = MWS.sample(64, torch.Generator().manual_seed(5))
    rows = seqs.tolist()
    out = M.evaluate(MWSOracle(MWS, mode="repeat"), seqs, MWS)
    greedy_pos = [sum(r[17 + j] == r[0] for r in rows) / 64 for j in range(16)]
    tf_pos = [1.0] + [sum(r[17 + j] == r[16 + j] for r in rows) / 64 for j in range(1, 16)]
    assert greedy_pos[0] == 1.0 and torch.allclose(out["acc_pos"], torch.tensor(greedy_pos))
    assert torch.allclose(out["acc_tf_pos"], torch.tensor(tf_pos))
    assert out["acc_first"].item() == 1.0
    assert math.isclose(out["acc_rest"].item(), sum(greedy_pos[1:]) / 15, rel_tol=1e-6)
    assert math.isclose(out["acc_tf"].item(), sum(tf_pos) / 16, rel_tol=1e-6)
    assert out["rho"].item() == 1.0 and out["entropy"].item() == 0.0
    rho_data = _rho_by_hand([r[17:] for r in rows])
    assert math.isclose(out["rho_data"].item(), rho_data, rel_tol=1e-6)
    assert math.isclose(sum(tf_pos[1:]) / 15, rho_data, rel_tol=1e-6)  # copying the previous output scores ρ
    # hidden states come from the teacher-forced pass: the query predicting y_{a+1} (a >= 1) holds onehot(y_a)
    pairs = [(a, b) for a in range(1, 16) for b in range(1, a)]
    cos = sum(sum(r[16 + a] == r[16 + b] for r in rows) / 64 for a, b in pairs) / len(pairs)
    assert math.isclose(out["cosine"].item(), cos, rel_tol=1e-5)


def test_bias_mask_is_c_on_omega_without_the_first_row_for_every_fixed_omega_task():
    for name, kwargs in [("mws", {"k": 3}), ("prefix_sum", {}), ("repeat", {"k": 2}), ("copy", {}), ("reverse", {}),
                         ("histogram", {}), ("addition", {}), ("concat_mws", {})]:
        task = make_task(name, **kwargs)
        omega = task.omega(task.sample(1, torch.Generator().manual_seed(0)))[0]
        assert torch.equal(M.bias_mask(task, 2.5, include_first=True)[0, 0], torch.where(omega, 2.5, 1.0)), name
        omega = omega.clone()
        omega[task.out_positions.start] = False  # the query predicting y_1 (partial solution) stays unbiased
        mask = M.bias_mask(task, 2.5)
        assert mask.shape == (1, 1, task.block_size, task.block_size), name
        assert torch.equal(mask[0, 0], torch.where(omega, 2.5, 1.0)), name


def test_bias_mask_refuses_a_sequence_dependent_omega():
    with pytest.raises(ValueError, match="depends on the sequence"):
        M.bias_mask(make_task("permutation", n=3, low=4, high=6), 2.0)
    with pytest.raises(ValueError, match="attn_bias_c needs a task with a fixed"):
        TrainConfig(task="permutation", attn_bias_c=2.0)


def test_greedy_outputs_from_the_teacher_forced_pass_equal_full_generation():
    """Sequences the model gets right under teacher forcing are not decoded again; the rest are decoded from
    their first error. Half the batch carries the model's own greedy outputs (so it is right on them), the
    other half random ones, some wrong only late."""
    from plateau_lib.plateau.model import GPT
    torch.manual_seed(0)
    model = GPT(TrainConfig(d_model=32).model_config()).eval()
    seqs = MWS.sample(64, torch.Generator().manual_seed(1))
    own = model.generate(seqs[:, :17], 16)
    seqs[:32, 17:] = own[:32, 17:]
    seqs[32:40, 17:29] = own[32:40, 17:29]  # right up to output 12, then the data's own tokens
    for bias in (None, M.bias_mask(MWS, 3.0)):
        caches = [{}]
        logits = model(seqs[:, :-1], attn_bias=bias, caches=caches)
        fast = M.greedy_outputs(model, seqs, MWS, bias, caches, logits)
        assert torch.equal(fast, model.generate(seqs[:, :17], 16, attn_bias=bias)[:, 17:])
