"""Joint trajectory PCA on synthetic trajectories with known answers."""
import math

import numpy as np
import pytest

from plateau_lib.engine.trajectory import TrajectoryPCA, fit_joint_pca, project, projections, smooth

F = 64


def planted(seed=0, noise=0.01, runs=(1, 4, math.inf)):
    """Trajectories t * u + noise along one unit direction u, T = 20 + 5 i rows for run i."""
    rng = np.random.default_rng(seed)
    u = rng.normal(size=F)
    u /= np.linalg.norm(u)
    rows = {label: np.linspace(0, 1 + i, 20 + 5 * i)[:, None] * u + noise * rng.normal(size=(20 + 5 * i, F))
            for i, label in enumerate(runs)}
    return u, rows


def generic(seed=1):
    rng = np.random.default_rng(seed)
    return {(m, s): rng.normal(size=(15, F)) * np.linspace(3, 0.1, F) for m in (2, 8) for s in (0, 1)}


def test_planted_direction_is_pc1():
    u, rows = planted()
    pca = fit_joint_pca(rows)
    assert isinstance(pca, TrajectoryPCA)
    assert abs(pca.components[0] @ u) > 0.99
    assert pca.explained_variance_ratio[0] > 0.9
    assert pca.components.shape == (2, F) and pca.mean.shape == (F,)
    assert pca.n_rows == 20 + 25 + 30 and pca.labels == (1, 4, math.inf)


def test_mean_centring_removes_a_constant_shift():
    rows = generic()
    shift = np.random.default_rng(5).normal(size=F) * 10
    a = fit_joint_pca(rows, n_components=3)
    b = fit_joint_pca({k: x + shift for k, x in rows.items()}, n_components=3)
    np.testing.assert_allclose(np.abs(a.components @ b.components.T), np.eye(3), atol=1e-8)
    np.testing.assert_allclose(a.explained_variance_ratio, b.explained_variance_ratio, rtol=1e-9)
    np.testing.assert_allclose(b.mean, a.mean + shift, atol=1e-9)


def test_projection_uses_only_mean_and_components():
    rows = generic()
    pca = fit_joint_pca(rows, n_components=4)
    x = rows[(2, 0)]
    np.testing.assert_allclose(project(pca, x), (x - pca.mean) @ pca.components.T)
    np.testing.assert_allclose(pca.project(x), project(pca, x))
    # an ideal predictor outside the fit: a single row, projected, changes nothing
    predictor = np.random.default_rng(9).normal(size=F) + 5.0
    z = project(pca, predictor)
    assert z.shape == (1, 4)
    np.testing.assert_allclose(z[0], (predictor - pca.mean) @ pca.components.T)
    again = fit_joint_pca(rows, n_components=4)
    np.testing.assert_array_equal(again.mean, pca.mean)
    np.testing.assert_array_equal(again.components, pca.components)
    # whereas fitting it in would move the mean: the check above can fail
    with_it = fit_joint_pca({**rows, "ridge": predictor[None]}, n_components=4)
    assert not np.allclose(with_it.mean, pca.mean)
    # a hand-built PCA is used exactly as given
    hand = TrajectoryPCA(mean=np.ones(F), components=np.eye(F)[:2], explained_variance_ratio=np.array([.5, .5]),
                         n_rows=2, labels=("a",))
    np.testing.assert_allclose(project(hand, np.arange(F)), [[-1.0, 0.0]])


def test_explained_variance_matches_covariance_eigenvalues():
    rows = generic()
    pca = fit_joint_pca(rows, n_components=5)
    ratio = pca.explained_variance_ratio
    assert np.all(np.diff(ratio) <= 0) and ratio.sum() <= 1
    eig = np.linalg.eigvalsh(np.cov(np.concatenate(list(rows.values())), rowvar=False))[::-1]
    np.testing.assert_allclose(ratio, eig[:5] / eig.sum(), rtol=1e-8)


def test_three_d_input_equals_flattened():
    rng = np.random.default_rng(3)
    cube = {m: rng.normal(size=(10, 8, 4)) for m in (1, 2, 3)}
    flat = {m: x.reshape(10, 32) for m, x in cube.items()}
    a, b = fit_joint_pca(cube, 3), fit_joint_pca(flat, 3)
    np.testing.assert_array_equal(a.components, b.components)
    np.testing.assert_array_equal(a.mean, b.mean)
    np.testing.assert_allclose(project(a, cube[1]), project(b, flat[1]))


@pytest.mark.parametrize("rows, n_components, match", [
    ({}, 2, "rows must map at least one"),
    ({1: np.zeros(F)}, 2, r"rows\[1\] must be an array of shape"),
    ({1: np.zeros((2, 3, 4, 5))}, 2, r"rows\[1\] must be an array of shape"),
    ({1: np.ones((5, F)), 2: np.ones((5, F + 1))}, 2, r"(?s)rows must all have the same width.*different K or D.*"
                                                       r"probe sequences B.*\{1: 64, 2: 65\}"),
    ({1: np.eye(5, F)}, 0, r"n_components .* \[1, 5\]"),
    ({1: np.eye(5, F)}, 6, r"n_components .* \[1, 5\]"),
    ({1: np.eye(5, F)}, 1.5, r"n_components must be an integer"),
    ({1: np.full((5, F), np.nan)}, 2, r"rows\[1\] must hold finite values"),
    ({1: np.eye(5, F), 2: np.full((3, F), np.inf)}, 2, r"rows\[2\] must hold finite values"),
    ({1: np.ones((1, F))}, 1, "at least 2 rows"),
    ({1: np.ones((3, F))}, 1, "rows are all identical"),
])
def test_bad_fit_inputs_raise(rows, n_components, match):
    with pytest.raises(ValueError, match=match):
        fit_joint_pca(rows, n_components)


def test_bad_projection_inputs_raise():
    pca = fit_joint_pca(generic())
    with pytest.raises(ValueError, match=r"rows must have the width F = B·K = 64 .* got width 32"):
        project(pca, np.zeros((3, 32)))
    with pytest.raises(ValueError, match="rows must hold finite values"):
        project(pca, np.full(F, np.nan))
    with pytest.raises(ValueError, match=r"steps\['x'\] must hold one step per row \(4\)"):
        projections(pca, {"x": np.zeros((4, F))}, steps={"x": [0, 1]})


def test_projections_tidy_frame():
    u, rows = planted(runs=(1, (4, 0)))
    pca = fit_joint_pca(rows, n_components=3)
    steps = {1: np.arange(20) * 100}
    df = projections(pca, {**rows, "ridge": u}, steps=steps)
    assert list(df.columns) == ["label", "step", "PC1", "PC2", "PC3"]
    assert len(df) == 20 + 25 + 1
    assert df[df["label"] == 1]["step"].tolist() == list(range(0, 2000, 100))
    assert df[df["label"] == (4, 0)]["step"].tolist() == list(range(25))
    np.testing.assert_allclose(df[df["label"] == (4, 0)][["PC1", "PC2", "PC3"]], project(pca, rows[(4, 0)]))
    np.testing.assert_allclose(df[df["label"] == "ridge"][["PC1", "PC2", "PC3"]], project(pca, u))


def test_smooth():
    x = np.random.default_rng(0).normal(size=(30, 2))
    np.testing.assert_array_equal(smooth(x, 1), x)
    assert smooth(x, 5).shape == x.shape
    np.testing.assert_allclose(smooth(np.full((10, 3), 2.5), 7), 2.5)
    y = np.array([0.0, 3.0, 6.0, 0.0])
    np.testing.assert_allclose(smooth(y), [0.0, 3.0, 3.0, 0.0])  # ends keep their value, middle averaged
    for window in (0, 2, -1, 2.0):
        with pytest.raises(ValueError, match="window must be an odd positive integer"):
            smooth(x, window)
