"""In-context regression data: nested task sets, token layout, OOD probes, seeded sampling, bad input."""
import math

import pytest
import torch

from plateau_lib.engine.runs import TrainConfig
from plateau_lib.engine.tasks import make_task
from plateau_lib.icl import ICLRegression, ood_batch, sample, task_set, to_tokens


def test_task_sets_are_nested_across_m():
    big = task_set(1000, 3, seed=7)
    for m in (1, 2, 5, 16, 17, 999):
        assert torch.equal(task_set(m, 3, seed=7), big[:m])
    assert not torch.equal(task_set(4, 3, seed=8), big[:4])
    task = ICLRegression(D=3, M=4, task_seed=7)
    assert torch.equal(task.tasks(), big[:4])


def test_samples_follow_the_generative_model(gen):
    xs, ys, ws = sample(4096, 8, 3, 0.25, gen)
    assert xs.shape == (4096, 8, 3) and ys.shape == (4096, 8) and ws.shape == (4096, 3)
    noise = ys - torch.einsum("bkd,bd->bk", xs, ws)
    assert abs(noise.var().item() - 0.25) < 0.01 and abs(ws.var().item() - 1) < 0.05
    tasks = task_set(3, 3)
    _, _, ws = sample(256, 8, 3, 0.25, gen, tasks=tasks)
    assert all(any(torch.equal(w, t) for t in tasks) for w in ws)  # every task comes from T_M
    assert len({tuple(w.tolist()) for w in ws}) == 3


def test_sampling_is_seeded_and_on_the_generators_device():
    task = make_task("icl_regression", M=8)
    a, b, c = (task.sample(4, torch.Generator().manual_seed(s)) for s in (0, 0, 1))
    assert all(torch.equal(x, y) for x, y in zip(a, b)) and not torch.equal(a[0], c[0])
    assert a[0].device.type == "cpu"


def test_tokens_interleave_x_and_y():
    xs = torch.arange(12.0).reshape(1, 3, 4) + 1
    ys = torch.tensor([[-1.0, -2.0, -3.0]])
    tok = to_tokens(xs, ys)
    assert tok.shape == (1, 6, 5)
    for k in range(3):
        assert tok[0, 2 * k].tolist() == [0.0] + xs[0, k].tolist()
        assert tok[0, 2 * k + 1].tolist() == [ys[0, k].item(), 0, 0, 0, 0]


def test_ood_probes_scale_inputs_or_tasks_and_keep_the_noise(gen):
    batch = sample(16, 4, 2, 0.5, gen)
    xs, ys, ws = batch
    noise = ys - torch.einsum("bkd,bd->bk", xs, ws)
    for kind in ("inputs", "tasks"):
        ox, oy, ow = ood_batch(batch, 5.0, kind)
        torch.testing.assert_close(ox, xs * 5 if kind == "inputs" else xs)
        torch.testing.assert_close(ow, ws * 5 if kind == "tasks" else ws)
        torch.testing.assert_close(oy, torch.einsum("bkd,bd->bk", xs * 5, ws) + noise)
    with pytest.raises(ValueError, match="kind"):
        ood_batch(batch, 5.0, "labels")


@pytest.mark.parametrize("kwargs,word", [
    ({"D": 0}, "'D'"), ({"K": 0}, "'K'"), ({"K": 2.0}, "'K'"), ({"noise_var": 0}, "noise_var"),
    ({"noise_var": -1.0}, "noise_var"), ({"noise_var": math.inf}, "noise_var"), ({"M": 0}, "'M'"),
    ({"M": 2.5}, "'M'"), ({"M": -math.inf}, "'M'"), ({"M": True}, "'M'"), ({"ood_scale": 0}, "ood_scale"),
    ({"d_mlp": 0}, "d_mlp"), ({"task_seed": -1}, "task_seed"), ({"doubled_residual": 1}, "doubled_residual"),
    ({"sigma": 1}, "bad parameters"),
])
def test_bad_parameters_raise_before_compute(kwargs, word):
    with pytest.raises(ValueError, match=word):
        make_task("icl_regression", **kwargs)
    with pytest.raises(ValueError, match=word):
        TrainConfig(task="icl_regression", task_kwargs=kwargs)


def test_gaussian_tasks_accept_none_or_inf():
    assert make_task("icl_regression", M=None).M is None and make_task("icl_regression", M=math.inf).M is None
    assert make_task("icl_regression", M=None).tasks() is None
