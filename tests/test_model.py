"""The GPT matches the paper's definition: linear causal scores, causality, sizes, biasing."""
import math

import pytest
import torch

from plateau_lib.engine.tasks import make_task
from plateau_lib.plateau import metrics as M
from plateau_lib.plateau.model import GPT, GPTConfig


def small(softmax=False, n_layer=1, n_head=1, d=16):
    torch.manual_seed(0)
    return GPT(GPTConfig(vocab_size=18, block_size=32, n_layer=n_layer, n_head=n_head, d_model=d, softmax=softmax))


def test_paper_model_has_the_reference_parameter_count():
    assert sum(p.numel() for p in GPT(GPTConfig(vocab_size=18, block_size=33)).parameters()) == 807_936


def test_linear_scores_are_raw_masked_qk():
    model = small(d=8)
    idx = torch.randint(0, 18, (2, 10))
    _, inside = model(idx, return_internals=True)
    attn = model.blocks[0].attn
    x = model.blocks[0].ln_1(model.wte(idx) + model.wpe(torch.arange(10)))
    q, k = attn.Q(x), attn.K(x)
    expect = torch.tril(q @ k.transpose(1, 2) / math.sqrt(8))
    assert torch.allclose(inside["attn"][0][:, 0], expect, atol=1e-6)


@pytest.mark.parametrize("softmax", [False, True])
def test_causality(softmax):
    model = small(softmax=softmax, n_layer=2, n_head=2)
    idx = torch.randint(0, 18, (3, 32))
    for t in (5, 20, 31):
        changed = idx.clone()
        changed[:, t] = (changed[:, t] + 1) % 18
        a, b = model(idx), model(changed)
        assert torch.equal(a[:, :t], b[:, :t])
        assert not torch.allclose(a[:, t], b[:, t])


def test_cached_generation_equals_full_reforward():
    model = small(n_layer=2, n_head=2).eval()
    task = make_task("mws")
    seqs = task.sample(16, torch.Generator().manual_seed(0))
    bias = M.bias_mask(task, 3.0)
    for b in (None, bias):
        caches = [{} for _ in model.blocks]
        teacher_forced = model(seqs[:, :-1], attn_bias=b, caches=caches)  # evaluation's pass, reused for the prompt
        fast = model.generate(seqs[:, :17], 16, attn_bias=b)
        reused = model.generate(seqs[:, :17], 16, attn_bias=b, caches=caches, logits=teacher_forced)
        slow = seqs[:, :17]
        for _ in range(16):
            nxt = model(slow, attn_bias=b)[:, -1].argmax(-1, keepdim=True)
            slow = torch.cat([slow, nxt], 1)
        assert torch.equal(fast, slow) and torch.equal(reused, slow)


def test_attention_bias_changes_exactly_the_omega_entries():
    model = small()
    task = make_task("mws")
    seqs = task.sample(4, torch.Generator().manual_seed(0))
    c = 2.5
    _, plain = model(seqs[:, :-1], return_internals=True)
    _, biased = model(seqs[:, :-1], attn_bias=M.bias_mask(task, c), return_internals=True)
    a, b = plain["attn"][0][:, 0], biased["attn"][0][:, 0]
    omega = task.omega(seqs)[0].clone()
    omega[16] = False  # the partial-solution row is not biased (as in the paper)
    assert int(omega.sum()) == 30
    assert torch.allclose(b[:, omega], c * a[:, omega])
    assert torch.equal(b[:, ~omega], a[:, ~omega])


def test_internals_cover_every_site():
    model = small(n_layer=2)
    logits, inside = model(torch.randint(0, 18, (2, 7)), return_internals=True)
    assert logits.shape == (2, 7, 18)
    for site in ("attn_out", "post_attn", "post_mlp"):
        assert len(inside[site]) == 2 and inside[site][0].shape == (2, 7, 16)
    assert inside["embed"].shape == inside["final_ln"].shape == (2, 7, 16)
    assert torch.allclose(inside["post_attn"][0], inside["embed"] + inside["attn_out"][0])


def test_bad_model_config_raises():
    with pytest.raises(ValueError, match="d_model"):
        GPTConfig(vocab_size=18, block_size=32, d_model=0)
    with pytest.raises(ValueError, match="divisible"):
        GPTConfig(vocab_size=18, block_size=32, d_model=10, n_head=3)


def test_paper_model_parameter_count_at_the_real_block_size():
    """The paper config as train() builds it: MWS n=16 gives 33-token sequences, so the model sees T = 32.

    (The reference code allocates block_size = 2n + 1 = 33 position rows but only ever feeds 32 tokens;
    its 807,936 includes that never-used row of 256, see the test above.)
    """
    from plateau_lib.engine.runs import TrainConfig
    cfg = TrainConfig().model_config()
    V, T, d = 18, 32, 256                       # vocab (0..16 outputs, SEP 17), input length, width
    assert (cfg.vocab_size, cfg.block_size, cfg.d_model, cfg.n_layer, cfg.n_head) == (V, T, d, 1, 1)
    counts = {
        "wte": V * d,                           # token embedding 18 x 256 = 4,608
        "wpe": T * d,                           # positions 32 x 256 = 8,192
        "ln": 3 * 2 * d,                        # ln_1, ln_2, ln_f: weight + bias = 1,536
        "attn": 4 * (d * d + d),                # Q, K, V, c_proj, each with bias = 263,168
        "mlp": (d * 4 * d + 4 * d) + (4 * d * d + d),  # c_fc 256->1024 and c_proj 1024->256, biases = 525,568
        "head": d * V,                          # lm_head, no bias (untied from wte) = 4,608
    }
    model = GPT(cfg)
    by_group = {"wte": 0, "wpe": 0, "ln": 0, "attn": 0, "mlp": 0, "head": 0}
    for name, p in model.named_parameters():
        group = next(g for g in ("wte", "wpe", "ln", "attn", "mlp") if g in name) if "lm_head" not in name else "head"
        by_group[group] += p.numel()
    assert by_group == counts
    assert sum(counts.values()) == 807_680 == sum(p.numel() for p in model.parameters())
    assert 807_936 - 807_680 == 1 * d           # exactly the reference's unused 33rd position row
