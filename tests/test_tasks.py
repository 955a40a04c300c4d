"""Task layouts against direct, loop-by-loop re-implementations of the paper's definitions."""
import pytest
import torch

from plateau_lib.engine.tasks import make_task


def test_mws_matches_definition(gen):
    for k in (1, 2, 3, 5):
        task = make_task("mws", n=16, p=17, k=k)
        seqs = task.sample(64, gen)
        assert seqs.shape == (64, 33) and task.vocab_size == 18
        for s in seqs.tolist():
            x, sep, y = s[:16], s[16], s[17:]
            assert sep == 17 and all(1 <= v <= 16 for v in x)
            for i in range(16):
                expect = x[i] if i < k - 1 else sum(x[i - k + 1: i + 1]) % 17
                assert y[i] == expect


def test_other_tasks_match_definitions(gen):
    s = make_task("prefix_sum").sample(8, gen)
    assert torch.equal(s[:, 17:], torch.cumsum(s[:, :16], 1) % 17)
    s = make_task("repeat", k=2).sample(8, gen)
    assert torch.equal(s[:, 17:25], s[:, :1].expand(8, 8)) and torch.equal(s[:, 25:], (s[:, :1] + 1).expand(8, 8) % 17)
    s = make_task("copy").sample(8, gen)
    assert torch.equal(s[:, 17:], s[:, :16]) and (s[:, 16] == 0).all()
    s = make_task("reverse").sample(8, gen)
    assert torch.equal(s[:, 17:], s[:, :16].flip(1))
    s = make_task("histogram").sample(8, gen)
    for row in s.tolist():
        assert row[17:] == [row[:16].count(v) for v in row[:16]]
    s = make_task("permutation").sample(8, gen)
    for row in s.tolist():
        perm = [v - 1 for v in row[17:33]]
        assert sorted(perm) == list(range(16)) and row[34:] == [row[p] for p in perm]
    task = make_task("addition", n=4)
    s = task.sample(16, gen)
    assert s.shape[1] == 15
    for row in s.tolist():
        a, b = int("".join(map(str, row[:4]))), int("".join(map(str, row[5:9])))
        assert row[4] == 10 and row[9] == 11
        assert int("".join(map(str, row[10:][::-1]))) == a + b
    s = make_task("concat_mws").sample(8, gen)
    for row in s.tolist():
        x, y = row[:16], row[17:]
        assert y[:4] == x[:4]
        assert y[4:9] == [(x[j] + x[j + 1]) % 17 for j in range(4, 9)]
        assert y[9:] == [(x[j + 1] + x[j + 2] + x[j + 3]) % 17 for j in range(9, 13)]


def test_mws_omega_is_the_reference_mask(gen):
    task = make_task("mws")
    om = task.omega(task.sample(2, gen))[0]
    assert om.shape == (32, 32) and int(om.sum()) == 31
    assert om[16].nonzero().flatten().tolist() == [0]
    for i in range(15):  # query 17+i attends to x_{i+1}, x_{i+2}
        assert om[17 + i].nonzero().flatten().tolist() == [i, i + 1]
    assert not om[:16].any()


def test_cosine_pair_counts_follow_the_paper():
    counts = {("mws", ()): 105, ("repeat", (("k", 1),)): 105, ("repeat", (("k", 2),)): 42,
              ("repeat", (("k", 4),)): 12, ("addition", ()): 6, ("copy", ()): 120, ("reverse", ()): 120,
              ("prefix_sum", ()): 105, ("histogram", ()): 120, ("permutation", ()): 120, ("concat_mws", ()): 78}
    for (name, kw), n in counts.items():
        assert len(make_task(name, **dict(kw)).cosine_pairs) == n


def test_concat_mws_cosine_segments_are_the_papers_columns():
    """train_mws_concat.py: three means over columns 0..3 (/42), 4..8 (/30) and 9..12 (/6) of the strictly
    lower-triangular 13 x 13 matrix; a column's pairs take every later row, in any segment."""
    segments = make_task("concat_mws").cosine_segments
    for (name, pairs), cols, n in zip(segments.items(), (range(0, 4), range(4, 9), range(9, 13)), (42, 30, 6)):
        assert sorted(pairs) == sorted((a, b) for b in cols for a in range(b + 1, 13)) and len(pairs) == n, name


def test_sampling_is_seeded():
    task = make_task("mws")
    a = task.sample(4, torch.Generator().manual_seed(0))
    b = task.sample(4, torch.Generator().manual_seed(0))
    c = task.sample(4, torch.Generator().manual_seed(1))
    assert torch.equal(a, b) and not torch.equal(a, c)


@pytest.mark.parametrize("name,kwargs,word", [
    ("nope", {}, "allowed"), ("mws", {"n": 1}, "'n'"), ("mws", {"p": 0}, "'p'"), ("mws", {"k": 0}, "'k'"),
    ("mws", {"k": 17}, "'k'"), ("mws", {"p": 10}, "'p'"), ("mws", {"window": 2}, "bad parameters"),
    ("repeat", {"k": 3}, "'k'"), ("addition", {"n": 0}, "'n'"),
])
def test_bad_task_parameters_raise(name, kwargs, word):
    with pytest.raises(ValueError, match=word):
        make_task(name, **kwargs)


# --- Ω, task by task, against hand-derived small instances -------------------------------------------------
# Layout reminder: the model sees seqs[:, :-1]; the query at position q predicts the token at q + 1. With
# o = prompt_len - 1 the query o + j predicts output y_{j+1}. Ω lists, for each such query, the key positions
# whose tokens determine that output (read off each task's definition, not off tasks.py).

def _id(name, kwargs):
    return "-".join([name] + [f"{k}{v}" for k, v in sorted(kwargs.items())])


def omega_dict(task, seqs, b=0):
    """{query: [keys]} for the rows of Ω that are not empty, in sequence b."""
    om = task.omega(seqs)
    assert om.dtype == torch.bool and om.shape == (seqs.shape[0], task.block_size, task.block_size)
    return {q: om[b, q].nonzero().flatten().tolist() for q in range(task.block_size) if om[b, q].any()}


OMEGA_BY_HAND = [
    # MWS n=4, k=2: [x1 x2 x3 x4 SEP y1 y2 y3 y4]; y1 = x1, y_i = x_{i-1} + x_i.
    ("mws", {"n": 4, "k": 2}, {4: [0], 5: [0, 1], 6: [1, 2], 7: [2, 3]}),
    # MWS n=4, k=1: y_i = x_i.
    ("mws", {"n": 4, "k": 1}, {4: [0], 5: [1], 6: [2], 7: [3]}),
    # Prefix sum n=4: y1 = x1; y_{i+1} = y_i + x_{i+1}, and y_i is the query token itself (position 4 + i).
    ("prefix_sum", {"n": 4}, {4: [0], 5: [1, 5], 6: [2, 6], 7: [3, 7]}),
    # Repeat_k: every output block is x1 (+ a constant), so every output query reads x1 only.
    ("repeat", {"n": 4, "k": 1}, {4: [0], 5: [0], 6: [0], 7: [0]}),
    ("repeat", {"n": 4, "k": 2}, {4: [0], 5: [0], 6: [0], 7: [0]}),
    # Copy: y_j = x_j. Reverse: y_j = x_{n+1-j}.
    ("copy", {"n": 4}, {4: [0], 5: [1], 6: [2], 7: [3]}),
    ("reverse", {"n": 4}, {4: [3], 5: [2], 6: [1], 7: [0]}),
    # Histogram (layer-1 Ω): the query predicting y_j = count(x_j) looks at its own input x_j.
    ("histogram", {"n": 4}, {4: [0], 5: [1], 6: [2], 7: [3]}),
    # Addition n=2, reversed sum: [a1 a0 + b1 b0 = s0 s1 s2] at positions 0..8. s_j reads digit j of a and b
    # (if any) and digit j-1 (its carry source, if any): s0 <- a0 (1), b0 (4); s1 <- a1, a0, b1, b0;
    # s2 (the carry out) <- a1 (0), b1 (3).
    ("addition", {"n": 2}, {5: [1, 4], 6: [0, 1, 3, 4], 7: [0, 3]}),
    # Addition n=1: [a0 + b0 = s0 s1]: both sum digits read a0 (0) and b0 (2).
    ("addition", {"n": 1}, {3: [0, 2], 4: [0, 2]}),
    # Concatenated MWS '123_disjoint_454' (16 inputs, SEP at 16, queries 16..28): y1..y4 = x1..x4;
    # y5..y9 = x_j + x_{j+1} (j = 5..9); y10..y13 = x_{j+1} + x_{j+2} + x_{j+3} (j = 10..13).
    ("concat_mws", {}, {16: [0], 17: [1], 18: [2], 19: [3],
                        20: [4, 5], 21: [5, 6], 22: [6, 7], 23: [7, 8], 24: [8, 9],
                        25: [10, 11, 12], 26: [11, 12, 13], 27: [12, 13, 14], 28: [13, 14, 15]}),
]


def test_omega_tests_cover_every_task():
    from plateau_lib.engine.tasks import TASKS
    covered = {name for name, _, _ in OMEGA_BY_HAND} | {"permutation"}
    no_omega = {"icl_regression", "next_token"}  # in-context regression and the language models have no Ω
    assert covered == set(TASKS) - no_omega, "a task without a hand-derived Ω test"


@pytest.mark.parametrize("name,kwargs,expect", OMEGA_BY_HAND, ids=[_id(n, kw) for n, kw, _ in OMEGA_BY_HAND])
def test_omega_matches_hand_derivation(name, kwargs, expect, gen):
    task = make_task(name, **kwargs)
    seqs = task.sample(3, gen)
    for b in range(3):  # a fixed Ω: the same in every sequence
        assert omega_dict(task, seqs, b) == expect


def test_permutation_omega_follows_each_sequence_by_hand():
    task = make_task("permutation", n=3, low=4, high=6)
    # [x1 x2 x3 | 0 | π+1 | 0 | y] with y_j = x_{π(j)}; the queries 7, 8, 9 predict y1, y2, y3.
    seqs = torch.tensor([[4, 5, 6, 0, 3, 1, 2, 0, 6, 4, 5],     # π = (2, 0, 1): y = (x3, x1, x2)
                         [4, 4, 5, 0, 1, 2, 3, 0, 4, 4, 5]])    # identity
    assert task.prompt_len == 8 and task.block_size == 10
    assert omega_dict(task, seqs, 0) == {7: [2], 8: [0], 9: [1]}
    assert omega_dict(task, seqs, 1) == {7: [0], 8: [1], 9: [2]}


# For these tasks the predicted token is the sum of the tokens at its Ω keys (mod p; copies are sums of one).
SUM_RULE = [("mws", {"n": 6, "k": 1}, 17), ("mws", {"n": 6, "k": 2}, 17), ("prefix_sum", {"n": 6}, 17),
            ("repeat", {"n": 6, "k": 1}, 7), ("copy", {"n": 6}, 100), ("reverse", {"n": 6}, 100),
            ("permutation", {"n": 6}, 100), ("concat_mws", {}, 17)]


@pytest.mark.parametrize("name,kwargs,mod", SUM_RULE, ids=[_id(n, kw) for n, kw, _ in SUM_RULE])
def test_omega_keys_determine_the_prediction(name, kwargs, mod, gen):
    task = make_task(name, **kwargs)
    seqs = task.sample(32, gen)
    om = task.omega(seqs)
    assert int(om.sum()) > 0 and not om[:, : task.prompt_len - 1].any()  # only output-predicting queries
    assert not torch.triu(om, diagonal=1).any()                          # and only causal keys
    for b, row in enumerate(seqs.tolist()):
        for q, keys in omega_dict(task, seqs, b).items():
            assert row[q + 1] == sum(row[k] for k in keys) % mod, (b, q, keys)


@pytest.mark.parametrize("name", ["histogram", "addition"])
def test_omega_is_causal_for_the_other_tasks(name, gen):
    task = make_task(name)
    om = task.omega(task.sample(4, gen))
    assert not torch.triu(om, diagonal=1).any() and not om[:, : task.prompt_len - 1].any()


def test_mws_omega_of_the_copied_outputs_for_k3(gen):
    task = make_task("mws", n=5, k=3)
    # [x1..x5 SEP y1..y5]: y1 = x1, y2 = x2 (copies), y3 = x1+x2+x3, y4 = x2+x3+x4, y5 = x3+x4+x5.
    assert omega_dict(task, task.sample(2, gen)) == {5: [0], 6: [1], 7: [0, 1, 2], 8: [1, 2, 3], 9: [2, 3, 4]}


def test_addition_omega_without_reversal(gen):
    task = make_task("addition", n=2, reverse=False)
    # [a1 a0 + b1 b0 = s2 s1 s0]: the query '=' (5) predicts the carry digit s2, 6 predicts s1, 7 predicts s0.
    assert omega_dict(task, task.sample(2, gen)) == {5: [0, 3], 6: [0, 1, 3, 4], 7: [1, 4]}


# --- samplers on hand-built inputs: the draws are replaced by fixed tensors, the answers worked out by hand ---

def _fixed_draws(task, *draws):
    """Make ``task``'s integer draws return ``draws`` in order (hand-built inputs through the real sampler)."""
    queue = [torch.tensor(d) for d in draws]
    task._randint = lambda low, high, shape, g, device: queue.pop(0)
    return task


def test_histogram_counts_on_a_hand_built_input(gen):
    task = _fixed_draws(make_task("histogram", n=6, alphabet=3), [[1, 2, 1, 3, 1, 2]])
    assert task.sample(1, gen).tolist() == [[1, 2, 1, 3, 1, 2, 0, 3, 2, 3, 1, 3, 2]]  # [x | SEP 0 | count(x_i)]
    assert task.vocab_size == 7  # max(alphabet, n) + 1: counts run up to n


def test_addition_carries_and_reversed_digits_on_hand_built_inputs(gen):
    task = _fixed_draws(make_task("addition", n=4), [9999, 1234, 40], [1, 5678, 60])
    rows = task.sample(3, gen).tolist()
    # 9999 + 1 = 10000 -> sum digits 1 0 0 0 0, reversed 0 0 0 0 1 (the final carry is the last output)
    assert rows[0] == [9, 9, 9, 9, 10, 0, 0, 0, 1, 11, 0, 0, 0, 0, 1]
    # 1234 + 5678 = 6912 -> 0 6 9 1 2, reversed 2 1 9 6 0 (carries into the tens, hundreds and thousands)
    assert rows[1] == [1, 2, 3, 4, 10, 5, 6, 7, 8, 11, 2, 1, 9, 6, 0]
    # 0040 + 0060 = 100 -> 0 0 1 0 0 reversed 0 0 1 0 0 (operands zero-padded to n digits)
    assert rows[2] == [0, 0, 4, 0, 10, 0, 0, 6, 0, 11, 0, 0, 1, 0, 0]
    plain = _fixed_draws(make_task("addition", n=4, reverse=False), [1234], [5678])
    assert plain.sample(1, gen).tolist()[0][10:] == [0, 6, 9, 1, 2]


def test_prefix_sum_repeat_copy_reverse_on_a_hand_built_input(gen):
    x = [[4, 1, 3, 2]]
    assert _fixed_draws(make_task("prefix_sum", n=4), x).sample(1, gen).tolist() == [[4, 1, 3, 2, 17, 4, 5, 8, 10]]
    # repeat_k, n = 4 (inputs 1..4, p = SEP = 5): k blocks of n/k outputs, block b = (x_1 + b) mod 5
    assert _fixed_draws(make_task("repeat", n=4, k=1), x).sample(1, gen).tolist() == [[4, 1, 3, 2, 5, 4, 4, 4, 4]]
    assert _fixed_draws(make_task("repeat", n=4, k=2), x).sample(1, gen).tolist()[0][5:] == [4, 4, 0, 0]
    assert _fixed_draws(make_task("repeat", n=4, k=4), x).sample(1, gen).tolist()[0][5:] == [4, 0, 1, 2]
    assert make_task("repeat", n=16, k=4).vocab_size == 18 and make_task("repeat").seq_len == 33
    assert _fixed_draws(make_task("copy", n=4), x).sample(1, gen).tolist() == [[4, 1, 3, 2, 0, 4, 1, 3, 2]]
    assert _fixed_draws(make_task("reverse", n=4), x).sample(1, gen).tolist() == [[4, 1, 3, 2, 0, 2, 3, 1, 4]]


def test_permutation_gathers_the_sources_on_a_hand_built_input(gen, monkeypatch):
    task = _fixed_draws(make_task("permutation", n=4, low=5, high=8), [[5, 6, 7, 8]])
    monkeypatch.setattr(torch, "rand", lambda *a, **kw: torch.tensor([[0.9, 0.1, 0.5, 0.3]]))  # argsort: 1, 3, 2, 0
    row = task.sample(1, gen).tolist()[0]
    assert row == [5, 6, 7, 8, 0, 2, 4, 3, 1, 0, 6, 8, 7, 5]  # [x | 0 | π+1 | 0 | y_j = x_{π(j)}]
    paper = make_task("permutation")
    assert (paper.seq_len, paper.prompt_len, paper.vocab_size) == (50, 34, 33)  # 3n + 2, 2n + 2, max(32, 16) + 1


# --- the permutation's per-layer Ω (reference §4.6: att_progress_measure1/2 and the alt_* measures) ----------

def test_permutation_layer_masks_are_the_papers(gen):
    task = make_task("permutation", n=3, low=4, high=6)
    seqs = torch.tensor([[4, 5, 6, 0, 3, 1, 2, 0, 6, 4, 5]])  # π = (2, 0, 1); pointer tokens at 4, 5, 6
    rows = lambda mask: {q: mask[0, q].nonzero().flatten().tolist() for q in range(10) if mask[0, q].any()}
    # layer 1 (att_mask1): the query 2n+1+i = 7+i reads the pointer token at n+1+i = 4+i
    assert rows(task.omega_pointer(seqs)) == {7: [4], 8: [5], 9: [6]}
    # layer 2 (att_mask2): the query 7+i reads x_{π(i)} at position π(i)
    assert rows(task.omega(seqs)) == {7: [2], 8: [0], 9: [1]}
    # alternative layer 1: the pointer token n+1+i reads x_{π(i)}
    assert rows(task.omega_alt_layer1(seqs)) == {4: [2], 5: [0], 6: [1]}


# --- the paper's collapse exclusions written out from its code (reference §4.5), compared as sets of pairs ---

def _lower(rows, cols):
    """The nonzero entries of logit_cs[rows, cols] for a strictly lower-triangular logit_cs."""
    return {(a, b) for a in rows for b in cols if b < a}


PAPER_EXCLUSIONS = {
    # Σ logit_cs[:, 1:] / 105 (MWS, prefix, repeat k = 1)
    ("mws", ()): _lower(range(16), range(1, 16)),
    ("prefix_sum", ()): _lower(range(16), range(1, 16)),
    ("repeat", (("k", 1),)): _lower(range(16), range(1, 16)),
    # (Σ logit_cs[2:8, 1:7] + Σ logit_cs[10:16, 9:15]) / 42
    ("repeat", (("k", 2),)): _lower(range(2, 8), range(1, 7)) | _lower(range(10, 16), range(9, 15)),
    # the 12 listed pairs / 12
    ("repeat", (("k", 4),)): {(2, 1), (3, 1), (3, 2), (6, 5), (7, 5), (7, 6), (10, 9), (11, 9), (11, 10),
                              (14, 13), (15, 13), (15, 14)},
    # Σ logit_cs[:-1, :] / 6 over the 5 positions from '='
    ("addition", ()): _lower(range(4), range(5)),
    # Σ logit_cs / 120
    ("copy", ()): _lower(range(16), range(16)), ("reverse", ()): _lower(range(16), range(16)),
    ("permutation", ()): _lower(range(16), range(16)), ("histogram", ()): _lower(range(16), range(16)),
}


@pytest.mark.parametrize("key", list(PAPER_EXCLUSIONS), ids=[f"{n}{dict(kw)}" for n, kw in PAPER_EXCLUSIONS])
def test_cosine_pairs_are_the_papers_sums(key):
    name, kw = key
    pairs = make_task(name, **dict(kw)).cosine_pairs
    assert len(pairs) == len(set(pairs)) and set(pairs) == PAPER_EXCLUSIONS[key]


def test_partial_solution_positions_per_task():
    assert make_task("mws").partial_positions == (1,)
    assert make_task("prefix_sum").partial_positions == (1,)
    assert make_task("addition", n=4).partial_positions == (5,)                 # the final carry, reversed: last
    assert make_task("addition", n=4, reverse=False).partial_positions == (1,)  # not reversed: first
    assert make_task("repeat", k=2).partial_positions == tuple(range(1, 9))     # the first block copies x_1
    assert make_task("concat_mws").partial_positions == (1, 2, 3, 4)           # the k = 1 copies
