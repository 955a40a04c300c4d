"""Task layouts against direct, loop-by-loop re-implementations of the paper's definitions."""
import pytest
import torch

from plateau_lib.tasks import make_task


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
    counts = {("mws", ()): 105, ("repeat", (("k", 2),)): 42, ("repeat", (("k", 4),)): 12,
              ("addition", ()): 6, ("copy", ()): 120, ("prefix_sum", ()): 105}
    for (name, kw), n in counts.items():
        assert len(make_task(name, **dict(kw)).cosine_pairs) == n


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
