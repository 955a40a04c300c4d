"""GP stage boundaries: a synthetic λ̂ curve with known plateaus, the pruning rule, warnings, bad input."""
import warnings

import numpy as np
import pytest

from plateau_lib.engine.stages import (centred_slope, gp_stage_boundaries, prune_boundaries, slope_minima,
                                      slope_sign_changes)

STEPS = np.unique(np.logspace(0, np.log10(5e5), 80).astype(int))


def _curve(x):
    """Three rises in ln-step (at 3, 7 and 11) separated by plateaus: a stand-in for λ̂ over training."""
    sig = lambda z: 1 / (1 + np.exp(-z))  # noqa: E731
    return 40 * sig((x - 3) / 0.4) + 80 * sig((x - 7) / 0.4) + 50 * sig((x - 11) / 0.4)


def test_finds_the_plateaus_of_a_synthetic_curve():
    fine = np.linspace(0, np.log(5e5 + 1), 200_001)
    slope = np.gradient(_curve(fine), fine)
    truth = fine[slope_minima(slope)]  # the flattest points of the two plateaus, from the exact curve
    assert truth.size == 2 and 4.5 < truth[0] < 5.2 and 8.8 < truth[1] < 9.3
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the length-scale bound's ConvergenceWarning must not escape
        found = gp_stage_boundaries(STEPS, _curve(np.log(STEPS + 1.0)), n_restarts=2)
    spacing = np.diff(np.log(STEPS + 1.0)).max()
    assert len(found.boundaries) == 2
    assert np.all(np.abs(np.log(np.array(found.boundaries) + 1.0) - truth) <= spacing)
    assert found.candidates == found.boundaries
    assert found.smooth.shape == found.slope.shape == STEPS.shape
    assert "k1__constant_value" in found.pinned and "at a bound" in found.fit_note  # amplitude capped at 1e3


def test_pruning_reproduces_the_published_seed_1_boundaries():
    """The raw candidates of the authors' seed-1 λ̂ (reference §6) pruned by our rule: one boundary near each
    of the published 1k, 40k, 126k and 320k; |slope| here is made up, flattest where the paper put them."""
    cands = np.array([1, 6, 9, 27, 984, 15151, 23711, 35353, 45454, 52524, 126262, 323232, 343434])
    abs_slope = np.array([1, 1, 1, 1, 2, 5, 4, 1, 3, 6, 2, 1, 3.0])
    kept = prune_boundaries(cands, abs_slope)
    assert kept == [984, 35353, 126262, 323232]
    assert prune_boundaries(cands, abs_slope, min_step=1_000) == [35353, 126262, 323232]  # 984 is before min_step


def test_centred_slope_is_exact_on_a_quadratic():
    x = np.array([0.0, 1.0, 3.0, 4.0, 7.0])
    slope = centred_slope(x, x ** 2)
    assert slope[1:-1].tolist() == [(1 + 4) / 2, (4 + 7) / 2, (7 + 11) / 2]  # mean of left and right quotients
    assert slope[0] == slope[1] and slope[-1] == slope[-2]


def test_minima_must_be_strict_and_under_the_tolerance():
    assert slope_minima(np.array([5, 1, 5, 2, 2, 5, 9, 20, 9])).tolist() == [1]
    assert slope_minima(np.array([50, 10, 50]), tol=8).tolist() == []


@pytest.mark.parametrize("steps,values,word", [
    ([0, 1, 2, 3], [1, 2, 3, 4], "at least 5"), ([0, 1, 1, 2, 3], [1, 2, 3, 4, 5], "increasing"),
    ([0, 1, 2, 3, 4], [1, 2, np.nan, 4, 5], "finite"), ([0, 1, 2, 3, 4], [1, 2, 3], "one length"),
])
def test_bad_input_raises(steps, values, word):
    with pytest.raises(ValueError, match=word):
        gp_stage_boundaries(steps, values)


def test_sign_changes_find_the_critical_points_that_sparse_points_step_over():
    """A minimum of a parabola between two sampled points: the slope never drops below the tolerance at a point, so
    slope_minima finds nothing, but the sign change is there, at the neighbour nearer the minimum."""
    steps = np.array([100, 200, 300, 400, 500])
    slope = np.array([-30.0, -19.5, 12.3, 40.0, 70.0])
    assert list(slope_minima(slope, 8.0)) == []
    assert slope_sign_changes(steps, slope) == [300]
    assert slope_sign_changes(steps, np.array([5.0, 3.0, -1.0, -4.0, 2.0])) == [300, 500]
    assert slope_sign_changes(steps, np.array([1.0, 2.0, 3.0, 4.0, 5.0])) == []   # monotone: none


def test_a_flat_curve_has_no_stages():
    """λ̂ of a model that never moves is one number at every checkpoint: its noise wobbles make local minima of
    |slope|, but nothing changes before or after them, so no boundary (and one stage)."""
    rng = np.random.default_rng(0)
    flat = 3.0 + 1e-6 * rng.standard_normal(STEPS.size)
    found = gp_stage_boundaries(STEPS, flat, n_restarts=2)
    assert found.boundaries == [] and found.candidates == []
