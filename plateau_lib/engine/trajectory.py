"""Joint trajectory PCA (Carroll et al., "transient ridge").

Each checkpoint of each training run becomes one row: the model's predictions on a fixed set of B probe
sequences, K predictions each, flattened to F = B·K numbers. The rows of all runs are stacked, mean-centred
and decomposed by SVD (scikit-learn's ``PCA``, imported only when a PCA is fitted). Every trajectory, and any
ideal predictor (dMMSE_M for each M, ridge) encoded as rows on the same B sequences but *not* part of the fit,
is then projected onto the first v principal components. The paper uses v = 2 (27.5% explained variance)
and v = 4, and plots the curves lightly smoothed (``smooth``).
"""
from __future__ import annotations

import numbers
from dataclasses import dataclass

import numpy as np
import pandas as pd


@dataclass(frozen=True)
class TrajectoryPCA:
    """A fitted joint PCA: ``mean`` (F,), ``components`` (v, F) with orthonormal rows, the
    ``explained_variance_ratio`` (v,) of each component (share of the stacked rows' total variance),
    ``n_rows`` stacked in the fit and the run ``labels`` in fit order. Component signs are arbitrary."""

    mean: np.ndarray
    components: np.ndarray
    explained_variance_ratio: np.ndarray
    n_rows: int
    labels: tuple

    def project(self, rows) -> np.ndarray:
        """Coordinates (T, v) of ``rows`` on the components; see the module function ``project``."""
        return project(self, rows)


def _as_rows(x, name: str, allow_single: bool = False) -> np.ndarray:
    """``x`` as a finite float array (T, F): (T, B, K) is flattened to (T, B·K); (F,) is one row if allowed."""
    x = np.asarray(x, dtype=float)
    allowed = ((1,) if allow_single else ()) + (2, 3)
    if x.ndim not in allowed:
        shapes = "(F,), " * allow_single + "(T, F) or (T, B, K)"
        raise ValueError(f"{name} must be an array of shape {shapes}; got shape {x.shape}")
    if x.ndim == 1:
        x = x[None, :]
    elif x.ndim == 3:
        x = x.reshape(x.shape[0], -1)
    if x.shape[0] == 0 or x.shape[1] == 0:
        raise ValueError(f"{name} must hold at least one row of at least one value; got shape {x.shape}")
    if not np.isfinite(x).all():
        raise ValueError(f"{name} must hold finite values only; found NaN or inf")
    return x


def fit_joint_pca(rows: dict, n_components: int = 2) -> TrajectoryPCA:
    """Stack every run's rows, mean-centre and fit the first ``n_components`` principal components.

    ``rows`` maps a run label (any hashable: an int M, ``math.inf``, a tuple (M, seed), ...) to its
    trajectory, an array (T_i, F) with one row per checkpoint, or (T_i, B, K) which is flattened.
    Ideal predictors belong in ``project``, not here, so that they do not shape the components.
    ``n_components`` (default 2, as in the paper's main figure) must lie in [1, min(total rows, F)].
    """
    if not rows:
        raise ValueError("rows must map at least one run label to an array of shape (T, F) or (T, B, K); "
                         "got an empty dict")
    arrays = {label: _as_rows(x, f"rows[{label!r}]") for label, x in rows.items()}
    widths = {label: x.shape[1] for label, x in arrays.items()}
    if len(set(widths.values())) > 1:
        raise ValueError("rows must all have the same width F = B·K: runs of different K or D, or on different "
                         f"numbers of probe sequences B, cannot share one PCA; widths by label: {widths}")
    n_rows, width = sum(x.shape[0] for x in arrays.values()), next(iter(widths.values()))
    if n_rows < 2:
        raise ValueError("rows must hold at least 2 rows in total to have any variance; got 1")
    if (not isinstance(n_components, numbers.Integral) or isinstance(n_components, bool)
            or not 1 <= n_components <= min(n_rows, width)):
        raise ValueError(f"n_components must be an integer in [1, min(total rows, F)] = [1, {min(n_rows, width)}] "
                         f"for {n_rows} rows of width {width}; got {n_components!r}")
    stacked = np.concatenate(list(arrays.values()))
    if np.ptp(stacked, axis=0).max() == 0:
        raise ValueError("rows are all identical, so there is no variance for a PCA to explain")

    from sklearn.decomposition import PCA

    pca = PCA(n_components=n_components, svd_solver="full").fit(stacked)
    return TrajectoryPCA(mean=pca.mean_, components=pca.components_,
                         explained_variance_ratio=pca.explained_variance_ratio_,
                         n_rows=n_rows, labels=tuple(arrays))


def project(pca: TrajectoryPCA, rows) -> np.ndarray:
    """Coordinates (T, v) of ``rows`` — (T, F), (T, B, K) or a single row (F,) — on the fitted components.

    Uses only ``pca.mean`` and ``pca.components``: ``(rows - mean) @ components.T``, so trajectories and ideal
    predictors outside the fit land in the same coordinates without changing them.
    """
    x = _as_rows(rows, "rows", allow_single=True)
    width = pca.mean.shape[0]
    if x.shape[1] != width:
        raise ValueError(f"rows must have the width F = B·K = {width} the PCA was fitted on (same probe "
                         f"sequences, same K and D); got width {x.shape[1]}")
    return (x - pca.mean) @ pca.components.T


def projections(pca: TrajectoryPCA, rows: dict, steps: dict | None = None) -> pd.DataFrame:
    """Tidy table of projected trajectories: columns ``label``, ``step``, ``PC1`` … ``PCv``.

    ``rows`` maps labels to arrays as in ``fit_joint_pca`` (predictors not in the fit are welcome). The step of
    each row is ``steps[label]`` when ``steps`` (default None) has that label, else the row index 0..T-1.
    """
    names = [f"PC{i + 1}" for i in range(pca.components.shape[0])]
    frames = []
    for label, x in rows.items():
        z = project(pca, x)
        step = np.arange(len(z)) if steps is None or label not in steps else np.asarray(steps[label])
        if step.shape != (len(z),):
            raise ValueError(f"steps[{label!r}] must hold one step per row ({len(z)}); got shape {step.shape}")
        frames.append(pd.DataFrame({"label": [label] * len(z), "step": step, **dict(zip(names, z.T))}))
    return pd.concat(frames, ignore_index=True)


def smooth(values, window: int = 3) -> np.ndarray:
    """Light centred moving average along axis 0, for plotting trajectories (window 1: no smoothing).

    Near the ends the window shrinks symmetrically (to the point itself at the first and last row), so the
    output keeps the input's shape and the trajectory keeps its true start and end.
    """
    if isinstance(window, bool) or not isinstance(window, numbers.Integral) or window < 1 or window % 2 == 0:
        raise ValueError(f"window must be an odd positive integer (1 = no smoothing); got {window!r}")
    values = np.asarray(values, dtype=float)
    n, half = len(values), window // 2
    out = np.empty_like(values)
    for i in range(n):
        h = min(half, i, n - 1 - i)
        out[i] = values[i - h:i + h + 1].mean(axis=0)
    return out
