"""Stage detection on metric curves: where the partial solution appears, the plateau, the jump; and the
GP stage boundaries of Hoogland et al. (scikit-learn is imported only when a GP is fitted)."""
from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np
import pandas as pd


def first_crossing(steps, values, level: float, above: bool = True):
    """First step at which ``values`` reaches ``level`` (>= if above, <= otherwise); None if never."""
    values = np.asarray(values, dtype=float)
    hit = values >= level if above else values <= level
    idx = np.flatnonzero(hit)
    return None if idx.size == 0 else int(np.asarray(steps)[idx[0]])


def flat_stretches(values, tol: float, relative: bool = False):
    """``(first, last)`` index of the longest stretch from each evaluation over which ``values`` stay within ``tol``
    of their value at ``first`` (``relative``: within ``tol`` times its magnitude); one per evaluation."""
    values = np.asarray(values, dtype=float)
    for start in range(len(values)):
        allowed = tol * abs(values[start]) if relative else tol
        end = start
        while end + 1 < len(values) and abs(values[end + 1] - values[start]) <= allowed:
            end += 1
        yield start, end


def longest_flat_stretch(steps, values, tol: float) -> float:
    """The most steps over which ``values`` stay within ``tol`` of their value at the stretch's first evaluation
    (0 for a single evaluation): a plateau's length, measured on the curve itself."""
    steps = np.asarray(steps, dtype=float)
    return max((steps[end] - steps[start] for start, end in flat_stretches(values, tol)), default=0.0)


PLATEAU_LOSS_TOL = 0.02        # a plateau: the loss on the outputs within 2% of its value at the stretch's start
PLATEAU_MIN_EVALUATIONS = 3    # ... at this many evaluations in a row at least


def flat_evaluations(values, tol: float = PLATEAU_LOSS_TOL) -> int:
    """The most evaluations in a row over which ``values`` stay within ``tol`` (relative) of their value at the
    first of them (1 for a single evaluation, 0 for none): how long a loss sits still."""
    return max((end - start + 1 for start, end in flat_stretches(values, tol, relative=True)), default=0)


def plateau_evaluations(metrics: pd.DataFrame, partial_step, jump_step, tol: float = PLATEAU_LOSS_TOL) -> int:
    """The reading of "a plateau after the partial solution" that the training-setups page judges runs by: the most
    evaluations in a row, from the step the partial solution is learned until the jump (the run's end if it never
    jumps; None or NaN), over which the loss on the outputs (``loss_out``) stays within ``tol`` of its value at the
    first; 0 when the partial solution is never learned. A run plateaus when this is at least
    ``PLATEAU_MIN_EVALUATIONS``: a loss that keeps falling from the partial solution to the jump is no plateau,
    however long it takes."""
    if partial_step is None or pd.isna(partial_step):
        return 0
    m = metrics[metrics["step"] >= partial_step]
    if jump_step is not None and not pd.isna(jump_step):
        m = m[m["step"] < jump_step]
    return flat_evaluations(m.sort_values("step")["loss_out"], tol)


def before_jump(metrics: pd.DataFrame, jump_step) -> pd.DataFrame:
    """The evaluations before ``jump_step`` (all of them when there is no jump; the first one when the jump
    comes at the first evaluation, so there is no plateau to speak of)."""
    before = metrics[metrics["step"] < jump_step] if jump_step is not None else metrics
    return before if not before.empty else metrics.iloc[:1]


def partial_accuracy(positions: pd.DataFrame, partial) -> pd.DataFrame:
    """Per step, the mean accuracy over the ``partial`` outputs (1-based) and over all the others
    (``acc_first``, ``acc_rest``), from a positions table (columns step, position, acc)."""
    inside = positions["position"].isin(list(partial))
    table = pd.DataFrame({"acc_first": positions[inside].groupby("step")["acc"].mean(),
                          "acc_rest": positions[~inside].groupby("step")["acc"].mean()})
    return table.reset_index()


def plateau_summary(metrics: pd.DataFrame, first_level: float = 0.9, jump_level: float = 0.5,
                    solved_level: float = 0.95, positions: pd.DataFrame | None = None, partial=(1,)) -> dict:
    """Milestones of one run from its metrics table (columns step, acc_first, acc_rest, acc, cosine, rho, apm).

    ``partial``: the 1-based outputs of the task's partial solution (``Task.partial_positions``). For
    y_1 alone (MWS) the table's ``acc_first``/``acc_rest`` are used; otherwise they are recomputed from the
    ``positions`` table over those outputs and the rest.

    - ``partial_step``: the partial solution reaches ``first_level`` accuracy;
    - ``jump_step``: the other outputs cross ``jump_level`` accuracy (the abrupt drop; all outputs
      when the partial solution is every output);
    - ``plateau_span``: jump_step - partial_step, the steps spent with only the partial solution;
    - ``solved_step``: overall accuracy reaches ``solved_level``;
    - peaks of cosine and ρ up to the jump, and APM at the last evaluation before the jump;
    - ``apm_peak``, the highest APM of the run, and ``apm_rank_corr``, the rank correlation of APM with the
      step up to the jump: the paper's "APM monotonically increases during the plateau, from near 0 to
      approximately 0.8" is a statement about the whole rise, not about the value just before the drop.
    """
    m = metrics.sort_values("step")
    if tuple(partial) != (1,):
        if positions is None:
            raise ValueError(f"plateau_summary needs the positions table for partial solution {tuple(partial)}")
        m = m.drop(columns=["acc_first", "acc_rest"]).merge(partial_accuracy(positions, partial), on="step")
        if m["acc_rest"].isna().all():  # the partial solution is every output: the jump is of all of them
            m["acc_rest"] = m["acc"]
    steps = m["step"].to_numpy()
    partial = first_crossing(steps, m["acc_first"], first_level)
    jump = first_crossing(steps, m["acc_rest"], jump_level)
    solved = first_crossing(steps, m["acc"], solved_level)
    before = before_jump(m, jump)
    return {
        "partial_step": partial,
        "jump_step": jump,
        "plateau_span": None if partial is None or jump is None else jump - partial,
        "solved_step": solved,
        "peak_cosine": float(before["cosine"].max()),
        "peak_rho": float(before["rho"].max()),
        "apm_start": float(m["apm"].iloc[0]),
        "apm_before_jump": float(before["apm"].iloc[-1]),
        "apm_peak": float(m["apm"].max()),
        "apm_rank_corr": (float(before["step"].corr(before["apm"], method="spearman"))
                          if len(before) > 2 and before["apm"].nunique() > 1 else np.nan),  # a flat APM has no rank order
        "final_acc": float(m["acc"].iloc[-1]),
    }


def summarize_runs(metrics: pd.DataFrame, by=("seed",), positions: pd.DataFrame | None = None,
                   **kwargs) -> pd.DataFrame:
    """``plateau_summary`` for each group (e.g. each seed, or each (c, seed)) as a tidy table (``positions``,
    when given, is grouped the same way)."""
    by = list(by)
    groups = dict(iter(positions.groupby(by))) if positions is not None else {}
    rows = [{**dict(zip(by, key if isinstance(key, tuple) else (key,))),
             **plateau_summary(g, positions=groups.get(key), **kwargs)}
            for key, g in metrics.groupby(by)]
    return pd.DataFrame(rows)


# --- GP stage boundaries (Hoogland et al., Sec. 5 and App. B.1) --------------------------------------------

GP_MIN_POINTS = 5
SLOPE_TOL = 8.0  # |dλ̂/dlog t| below which a local minimum of the slope counts (LLC units per unit ln-step)


@dataclass
class GPStages:
    """Stage boundaries of one curve. ``candidates``: every checkpoint where |slope| is a strict local
    minimum below ``slope_tol``; ``boundaries``: those ``prune_boundaries`` keeps; ``fit_note``: the fitted kernel and
    any hyperparameter pinned at its bound (the ConvergenceWarning that sklearn would print)."""
    steps: np.ndarray
    values: np.ndarray
    smooth: np.ndarray        # GP posterior mean at log(step + 1)
    slope: np.ndarray         # d smooth / d log(step + 1), centred differences
    candidates: list
    boundaries: list
    kernel: str
    pinned: list              # names of the kernel hyperparameters at a bound of their range
    fit_note: str


PINNED_NAMES = {"k1__constant_value": "the amplitude", "k2__length_scale": "the length scale"}  # scikit-learn's names


def gp_smooth(x, y, amplitude_bounds=(1e-3, 1e3), length_scale=3.0, length_scale_bounds=(0.5, 1e3),
              n_restarts: int = 10, seed: int = 0):
    """GP posterior mean of y at x with Hoogland et al.'s kernel C(1, amplitude_bounds) · RBF(length_scale,
    length_scale_bounds) (alpha 1e-10, y not normalised). Returns (mean, fitted kernel, pinned names).

    The optimiser's ConvergenceWarning about a hyperparameter at its bound is caught and reported as
    ``pinned`` instead: on the published λ̂ curves the fit pins at C = 1e3 (31.6²) and length scale 0.5
    (in units of ln-step), i.e. the smoothing is as short as the bounds allow."""
    from sklearn.exceptions import ConvergenceWarning
    from sklearn.gaussian_process import GaussianProcessRegressor
    from sklearn.gaussian_process.kernels import RBF, ConstantKernel

    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    if x.size < GP_MIN_POINTS:
        raise ValueError(f"a GP fit needs at least {GP_MIN_POINTS} points, got {x.size}")
    kernel = ConstantKernel(1.0, amplitude_bounds) * RBF(length_scale, length_scale_bounds)
    gp = GaussianProcessRegressor(kernel=kernel, n_restarts_optimizer=n_restarts, random_state=seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        gp.fit(x[:, None], y)
    fitted = gp.kernel_
    pinned = [h.name for h in fitted.hyperparameters
              if np.isclose(fitted.get_params()[h.name], h.bounds.ravel(), rtol=1e-3).any()]
    return gp.predict(x[:, None]), fitted, pinned


def centred_slope(x, f):
    """df/dx at each point: the mean of the left and right difference quotients; endpoints copy their
    neighbours (Hoogland et al.'s rule)."""
    x, f = np.asarray(x, dtype=float), np.asarray(f, dtype=float)
    q = np.diff(f) / np.diff(x)
    slope = np.empty_like(f)
    slope[1:-1] = (q[:-1] + q[1:]) / 2
    slope[0], slope[-1] = slope[1], slope[-2]
    return slope


def slope_minima(slope, tol: float = SLOPE_TOL) -> np.ndarray:
    """Indices i where |slope_i| < tol and is strictly below both neighbours."""
    a = np.abs(np.asarray(slope, dtype=float))
    i = np.arange(1, a.size - 1)
    return i[(a[i] < a[i - 1]) & (a[i] < a[i + 1]) & (a[i] < tol)]


def slope_sign_changes(steps, slope) -> list[int]:
    """The steps where ``slope`` changes sign between neighbouring points, each at the point of the pair with the
    smaller |slope|: critical points of the curve. ``slope_minima`` steps over one when the points are too far
    apart for |slope| to fall below its tolerance at either neighbour (the paper's rule assumes 190 checkpoints)."""
    steps, slope = np.asarray(steps), np.asarray(slope, dtype=float)
    i = np.flatnonzero(np.sign(slope[:-1]) * np.sign(slope[1:]) < 0)
    return [int(steps[j] if abs(slope[j]) <= abs(slope[j + 1]) else steps[j + 1]) for j in i]


def between_changes(slope, idx, tol: float = SLOPE_TOL) -> np.ndarray:
    """The candidates ``idx`` with the curve changing (|slope| >= ``tol``) somewhere before and somewhere after
    them: a boundary separates two developments, so a flat curve, whose |slope| is a minimum at every wobble of
    its noise, has none."""
    a = np.abs(np.asarray(slope, dtype=float))
    return np.array([i for i in idx if a[:i].max(initial=0) >= tol and a[i + 1:].max(initial=0) >= tol], dtype=int)


def prune_boundaries(steps, abs_slope, min_step: int = 100, merge_ratio: float = 2.0):
    """Our explicit version of the paper's hand pruning (returns the kept steps).

    1. drop candidates before ``min_step`` (early-training artefacts);
    2. group the rest by single linkage: consecutive candidates whose (step + 1) differ by less than a
       factor ``merge_ratio`` are near-duplicates of one boundary;
    3. keep, in each group, the candidate with the smallest |slope| (the flattest point of the plateau).
    On the published seed-1 candidates this leaves one boundary near each of 1k, 40k, 126k and 320k."""
    steps, abs_slope = np.asarray(steps), np.asarray(abs_slope, dtype=float)
    keep = steps >= min_step
    steps, abs_slope = steps[keep], abs_slope[keep]
    groups = np.cumsum(np.r_[True, (steps[1:] + 1) >= merge_ratio * (steps[:-1] + 1)]) if steps.size else steps
    return [int(steps[groups == g][np.argmin(abs_slope[groups == g])]) for g in np.unique(groups)]


def gp_stage_boundaries(steps, values, slope_tol: float = SLOPE_TOL, min_step: int = 100,
                        merge_ratio: float = 2.0, **gp_kwargs) -> GPStages:
    """Stage boundaries of a curve (e.g. λ̂ over checkpoints), as in Hoogland et al.: GP-smooth ``values``
    over log(step + 1) (``gp_smooth``), take the slope by centred differences, keep the strict local minima
    of |slope| below ``slope_tol`` with the curve changing before and after them as candidates
    (``between_changes``: a flat curve has no stages), and prune them (``prune_boundaries``). Unlike the
    published notebook, a candidate is reported at its own checkpoint (theirs is one checkpoint early)."""
    steps, values = np.asarray(steps), np.asarray(values, dtype=float)
    if steps.ndim != 1 or steps.shape != values.shape:
        raise ValueError(f"steps and values must be 1-D of one length, got {steps.shape} and {values.shape}")
    if (steps < 0).any() or (np.diff(steps) <= 0).any():
        raise ValueError("steps must be non-negative and strictly increasing")
    if not np.isfinite(values).all():
        raise ValueError("values must be finite")
    if not slope_tol > 0:
        raise ValueError(f"slope_tol must be > 0, got {slope_tol!r}")
    x = np.log(steps + 1.0)
    smooth, kernel, pinned = gp_smooth(x, values, **gp_kwargs)
    slope = centred_slope(x, smooth)
    idx = between_changes(slope, slope_minima(slope, slope_tol), slope_tol)
    boundaries = prune_boundaries(steps[idx], np.abs(slope[idx]), min_step, merge_ratio)
    (amp_lo, amp_hi), (len_lo, len_hi) = kernel.k1.constant_value_bounds, kernel.k2.length_scale_bounds
    note = (f"fitted kernel: amplitude {np.sqrt(kernel.k1.constant_value):.3g}², length scale "
            f"{kernel.k2.length_scale:.2g} ln-steps; "
            + (f"{' and '.join(PINNED_NAMES.get(p, p) for p in pinned)} at a bound of its range (amplitude "
               f"{amp_lo:g} to {amp_hi:g}, length scale {len_lo:g} to {len_hi:g} ln-steps)"
               if pinned else "no hyperparameter at a bound"))
    return GPStages(steps, values, smooth, slope, [int(s) for s in steps[idx]], boundaries, str(kernel),
                    pinned, note)
