"""Bayes baselines against independent computations: enumeration, the kernel form of ridge, limits."""
import numpy as np
import torch

from plateau_lib.icl import bayes_predict, delta, dmmse_predict, ridge_predict, sample, task_set


def _batch(B, K, D, noise_var, seed, tasks=None):
    xs, ys, ws = sample(B, K, D, noise_var, torch.Generator().manual_seed(seed), tasks=tasks)
    return xs.double(), ys.double(), ws.double()


def test_dmmse_is_the_posterior_mean_by_enumeration():
    """p(t_m | pairs before k) ∝ Π_j N(y_j; t_mᵀx_j, σ²), enumerated over the M tasks in float64."""
    D, K, M, s2 = 3, 5, 6, 0.3
    tasks = task_set(M, D, seed=3).double()
    xs, ys, _ = _batch(8, K, D, s2, 0, tasks.float())
    got = dmmse_predict(xs, ys, tasks, s2).numpy()
    X, Y, T = xs.numpy(), ys.numpy(), tasks.numpy()
    for b in range(8):
        for k in range(K):
            like = np.array([np.prod([np.exp(-(Y[b, j] - t @ X[b, j]) ** 2 / (2 * s2)) / np.sqrt(2 * np.pi * s2)
                                      for j in range(k)]) for t in T])
            w_hat = (like / like.sum()) @ T
            assert abs(got[b, k] - w_hat @ X[b, k]) < 1e-10
    np.testing.assert_allclose(got[:, 0], X[:, 0] @ T.mean(0), atol=1e-12)  # first token: the task mean


def test_dmmse_chunks_over_tasks_exactly():
    tasks = task_set(200, 4, seed=1).double()
    xs, ys, _ = _batch(16, 8, 4, 0.125, 1, tasks.float())
    whole = dmmse_predict(xs, ys, tasks, 0.125)
    torch.testing.assert_close(dmmse_predict(xs, ys, tasks, 0.125, chunk_elements=16 * 8 * 7), whole)


def test_ridge_is_the_closed_form():
    """The kernel form ŵ = Xᵀ(XXᵀ + σ²I)⁻¹y of the ridge solution, prefix by prefix; ŵ_1 = 0."""
    D, K, s2 = 4, 8, 0.125
    xs, ys, _ = _batch(6, K, D, s2, 2)
    got = ridge_predict(xs, ys, s2).numpy()
    X, Y = xs.numpy(), ys.numpy()
    for b in range(6):
        assert got[b, 0] == 0
        for k in range(1, K):
            Xk, yk = X[b, :k], Y[b, :k]
            w = Xk.T @ np.linalg.solve(Xk @ Xk.T + s2 * np.eye(k), yk)
            assert abs(got[b, k] - w @ X[b, k]) < 1e-10


def test_dmmse_tends_to_ridge_as_m_grows():
    """With M tasks drawn from N(0, I) the dMMSE posterior mean is a Monte Carlo estimate of ridge's."""
    xs, ys, _ = _batch(64, 4, 2, 0.25, 4)
    ridge = ridge_predict(xs, ys, 0.25)
    big = task_set(2 ** 16, 2, seed=5).double()
    gaps = [delta(dmmse_predict(xs, ys, big[:m], 0.25), ridge).item() for m in (4, 64, 1024, 2 ** 16)]
    assert all(a > b for a, b in zip(gaps, gaps[1:])), gaps
    assert gaps[-1] < 1e-3 * gaps[0], gaps


def test_with_one_task_the_bayes_predictor_is_that_task():
    tasks = task_set(1, 3, seed=9)
    xs, ys, ws = sample(32, 8, 3, 0.125, torch.Generator().manual_seed(0), tasks=tasks)
    assert torch.equal(ws, tasks.expand(32, 3))
    torch.testing.assert_close(bayes_predict(xs, ys, 0.125, tasks), xs @ tasks[0])
    torch.testing.assert_close(bayes_predict(xs, ys, 0.125), ridge_predict(xs, ys, 0.125))


def test_delta_is_per_token_and_optionally_per_dimension():
    a, b = torch.zeros(10, 4), torch.tensor([[1.0, 2.0, 3.0, 4.0]]).expand(10, 4)
    assert delta(a, b).item() == 7.5                       # (1 + 4 + 9 + 16) / 4
    assert delta(a, b, D=3).item() == 2.5
    assert delta(a, b, by_token=True).tolist() == [1.0, 4.0, 9.0, 16.0]
