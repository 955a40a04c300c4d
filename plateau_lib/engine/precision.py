"""Matrix products as a TPU computes float32 ones at XLA's default precision: both operands rounded to bfloat16,
the products summed in float32, the result float32, in the forward pass and in the backward pass's products.

``matmul_operands("bfloat16")`` is a context in which ``F.linear``, ``torch.matmul``/``@`` and ``torch.bmm``
compute that way; every other operation (LayerNorm, softmax, the loss, the optimizer) stays float32, as on the TPU.
The rounding is a pair of autograd functions that ``torch.func.vmap`` and ``grad`` see through, so the stacked
training step uses it too. ``matmul_operands("float32")`` changes nothing (and TF32 stays off, torch's default).
"""
from __future__ import annotations

import contextlib

import torch
import torch.nn.functional as F
from torch.overrides import TorchFunctionMode

MATMUL_OPERANDS = ("float32", "bfloat16")


def to_bf16(x: torch.Tensor) -> torch.Tensor:
    """``x`` rounded to the nearest bfloat16 (ties to even), kept in its own dtype."""
    return x.to(torch.bfloat16).to(x.dtype)


class _RoundValue(torch.autograd.Function):
    """Forward: round to bfloat16. Backward: the gradient passes unchanged (the operand's own gradient is float32)."""
    generate_vmap_rule = True

    @staticmethod
    def forward(x):
        return to_bf16(x)

    @staticmethod
    def setup_context(ctx, inputs, output):
        pass

    @staticmethod
    def backward(ctx, grad):
        return grad


class _RoundGradient(torch.autograd.Function):
    """Forward: identity. Backward: the incoming gradient rounded to bfloat16, as the operand of the backward
    products (gradient @ weightᵀ and inputᵀ @ gradient)."""
    generate_vmap_rule = True

    @staticmethod
    def forward(x):
        return x.clone()

    @staticmethod
    def setup_context(ctx, inputs, output):
        pass

    @staticmethod
    def backward(ctx, grad):
        return to_bf16(grad)


def bf16_product(product, a, b):
    """``product(a, b)`` with bfloat16-rounded operands, in the forward and the backward pass."""
    return _RoundGradient.apply(product(_RoundValue.apply(a), _RoundValue.apply(b)))


class _BF16Operands(TorchFunctionMode):
    PRODUCTS = {F.linear, torch.matmul, torch.Tensor.matmul, torch.Tensor.__matmul__, torch.bmm, torch.Tensor.bmm}

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func is F.linear:
            x, weight = args[0], args[1]
            bias = args[2] if len(args) > 2 else kwargs.get("bias")
            out = bf16_product(lambda a, w: F.linear(a, w), x, weight)
            return out if bias is None else out + bias
        if func in self.PRODUCTS:
            return bf16_product(torch.matmul, args[0], args[1])
        return func(*args, **kwargs)


def matmul_operands(kind: str):
    """The context in which training computes its matrix products (``TrainConfig.matmul_operands``)."""
    if kind not in MATMUL_OPERANDS:
        raise ValueError(f"matmul_operands must be one of {MATMUL_OPERANDS}, got {kind!r}")
    return _BF16Operands() if kind == "bfloat16" else contextlib.nullcontext()
