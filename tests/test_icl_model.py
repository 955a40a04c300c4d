"""Hoogland et al.'s L2H4 regression transformer: size, initial norm, causality, the doubled residual."""
import torch

from plateau_lib.icl import ICLConfig, ICLTransformer


def _n_params(model):
    return sum(p.numel() for p in model.parameters())


def test_parameter_count_is_the_published_51717():
    torch.manual_seed(0)
    assert _n_params(ICLTransformer(ICLConfig(D=4, K=8))) == 51_717
    assert _n_params(ICLTransformer(ICLConfig(D=4, K=16))) == 52_741        # the reference's K = 16 count
    assert _n_params(ICLTransformer(ICLConfig(doubled_residual=False))) == 51_717


def test_initial_weight_norm_matches_the_published_runs():
    """PyTorch's default init gives ‖θ‖ ≈ 24.9 at step 0, the value in the authors' evaluation logs."""
    torch.manual_seed(1)
    model = ICLTransformer(ICLConfig())
    norm = torch.sqrt(sum(p.square().sum() for p in model.parameters())).item()
    assert abs(norm - 24.9) < 0.5


def test_prediction_k_sees_only_earlier_pairs_and_x_k():
    torch.manual_seed(0)
    model = ICLTransformer(ICLConfig(D=3, K=6, d_model=16, n_head=2, d_mlp=16))
    xs, ys = torch.randn(5, 6, 3), torch.randn(5, 6)
    pred = model(xs, ys)
    xs2, ys2 = xs.clone(), ys.clone()
    xs2[:, 4:] += 1.0
    ys2[:, 3:] += 1.0  # y_4 is not an input of prediction 4 (0-based 3)
    pred2 = model(xs2, ys2)
    torch.testing.assert_close(pred2[:, :4], pred[:, :4])
    assert not torch.allclose(pred2[:, 4:], pred[:, 4:])


def test_doubled_residual_doubles_the_stream_before_each_block_output():
    """With doubled_residual each layer maps x to x + block(x) = 2x + Δ(x); without it, to x + Δ(x)."""
    torch.manual_seed(0)
    doubled = ICLTransformer(ICLConfig(D=2, K=3, n_layer=1, d_model=8, n_head=2, d_mlp=8))
    plain = ICLTransformer(ICLConfig(D=2, K=3, n_layer=1, d_model=8, n_head=2, d_mlp=8, doubled_residual=False))
    plain.load_state_dict(doubled.state_dict())
    xs, ys = torch.randn(4, 3, 2), torch.randn(4, 3)
    _, a = doubled(xs, ys, return_internals=True)
    _, b = plain(xs, ys, return_internals=True)
    torch.testing.assert_close(a["resid"][0], b["resid"][0] + a["embed"])
    assert a["attn"][0].shape == (4, 2, 6, 6)
