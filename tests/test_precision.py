"""bfloat16 matrix operands (``engine.precision``) against hand-computed products, and in training."""
import pytest
import torch
import torch.nn.functional as F
from torch.func import grad, vmap

from plateau_lib.engine.precision import matmul_operands, to_bf16
from plateau_lib.engine.runs import TrainConfig
from plateau_lib.engine import cache
from plateau_lib.engine.train import train, train_many

ICL = TrainConfig(task="icl_regression", task_kwargs={"D": 2, "K": 4, "noise_var": 0.125, "d_mlp": 16},
                  n_layer=1, n_head=2, d_model=16, lr=3e-3, schedule="one_cycle", steps=12, batch_size=16,
                  eval_every=6, eval_batch=32, device="cpu")


def test_to_bf16_rounds_to_nearest_even():
    # bfloat16 keeps 8 significant bits: 1 + 2^-8 is a tie between 1 and 1 + 2^-7 (rounds to the even, 1);
    # 1 + 3 * 2^-8 is a tie between 1 + 2^-7 and 1 + 2^-6 (rounds to the even, 1 + 2^-6)
    x = torch.tensor([1 + 2 ** -8, 1 + 3 * 2 ** -8, 1 + 2 ** -7, 3.0])
    assert to_bf16(x).tolist() == [1.0, 1 + 2 ** -6, 1 + 2 ** -7, 3.0]
    assert to_bf16(x).dtype == torch.float32


def test_linear_and_matmul_forward_and_backward_use_rounded_operands(gen):
    x = torch.randn(5, 7, generator=gen, requires_grad=True)
    w = torch.randn(3, 7, generator=gen, requires_grad=True)
    b = torch.randn(3, generator=gen, requires_grad=True)
    g = torch.randn(5, 3, generator=gen)
    with matmul_operands("bfloat16"):
        y = F.linear(x, w, b)
        z = x @ w.T
    (y * g).sum().backward()
    assert torch.equal(y, to_bf16(x) @ to_bf16(w).T + b) and torch.equal(z, to_bf16(x) @ to_bf16(w).T)
    assert not torch.equal(y, x @ w.T + b)  # the rounding changed something
    assert torch.equal(x.grad, to_bf16(g) @ to_bf16(w))      # backward products: both operands rounded
    assert torch.equal(w.grad, to_bf16(g).T @ to_bf16(x))
    assert torch.equal(b.grad, g.sum(0))                    # the bias's gradient is a sum, not a product


def test_the_rounding_passes_through_vmap_and_grad(gen):
    w = torch.randn(3, 4, 4, generator=gen)
    x = torch.randn(4, generator=gen)
    loss = lambda w: (w @ x).square().sum()  # noqa: E731
    with matmul_operands("bfloat16"):
        batched = vmap(grad(loss))(w)
    for i in range(3):
        wi = w[i].clone().requires_grad_(True)
        with matmul_operands("bfloat16"):
            loss(wi).backward()
        assert torch.equal(batched[i], wi.grad)


def test_float32_changes_nothing_and_unknown_kinds_are_refused(gen):
    a, b = torch.randn(4, 4, generator=gen), torch.randn(4, 4, generator=gen)
    with matmul_operands("float32"):
        assert torch.equal(a @ b, torch.mm(a, b))
    with pytest.raises(ValueError, match="matmul_operands must be one of"):
        matmul_operands("float16")
    with pytest.raises(ValueError, match="matmul_operands must be one of"):
        ICL.replace(matmul_operands="bf16")


def test_training_with_bf16_operands_differs_slightly_and_stacks_like_one_run():
    fp32, bf16 = train(ICL, progress=False), train(ICL.replace(matmul_operands="bfloat16"), progress=False)
    gap = max(float((fp32.final_state[k] - bf16.final_state[k]).abs().max()) for k in fp32.final_state)
    assert 0 < gap < 1e-2
    assert bf16.meta["matmul_operands"] == "bfloat16"
    # runs of both kinds in one call: stacked by kind, each as trained alone. A batched product may sum in another
    # order, and a last-bit difference can flip a bfloat16 rounding (2^-8 of a value), so "as alone" means far
    # closer than the float32 run of the same seed, not bitwise
    mixed = train_many([ICL, ICL.replace(matmul_operands="bfloat16", seed=1)], backend="stacked", progress=False)
    alone = train(ICL.replace(matmul_operands="bfloat16", seed=1), progress=False)
    same_seed_fp32 = train(ICL.replace(seed=1), progress=False)
    stacking = max(float((mixed[1].final_state[k] - alone.final_state[k]).abs().max()) for k in alone.final_state)
    precision = max(float((same_seed_fp32.final_state[k] - alone.final_state[k]).abs().max())
                    for k in alone.final_state)
    assert stacking < precision / 5
    for k in fp32.final_state:
        torch.testing.assert_close(mixed[0].final_state[k], fp32.final_state[k], atol=1e-5, rtol=1e-5)
    # float32 is the key-neutral default: the committed results' keys do not move
    assert cache.cache_key(ICL) == cache.cache_key(ICL.replace(matmul_operands="float32"))
    assert cache.cache_key(ICL) != cache.cache_key(ICL.replace(matmul_operands="bfloat16"))
