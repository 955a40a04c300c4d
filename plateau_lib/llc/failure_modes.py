"""The four ways an SGLD estimate of the LLC fails, produced on purpose, and how to recognise each.

- **diverged**: one chain with ε far too large (30x the others'); its λ̂ runs away from the other
  chains' (it stays finite, so only the runaway rule of result.py catches it), it is excluded with a warning.
- **not converged**: ε far too small; the running λ̂ still climbs at the last draw, MALA acceptance ≈ 1.
- **escaped**: γ = 0 and a large nβ at a point that is not a minimum; the drift is gradient descent and the
  loss falls steadily below L(w*), so λ̂ is strongly negative and still falling.
- **negative**: the same point with strong localization (γ = 1000); the chains still find lower loss
  inside the ball, and λ̂ is negative with a warning.
"""
from __future__ import annotations

import warnings
from typing import Callable

import numpy as np
import pandas as pd

from plateau_lib.book.pages import MISSING
from plateau_lib.llc.config import SGLDConfig
from plateau_lib.llc.estimator import estimate_llc
from plateau_lib.llc.result import LLCResult, LLCWarning, combine, converged

DIVERGED = "diverged (one chain at ε = 0.03, the others at 1e-3)"
NOT_CONVERGED = "not converged (ε = 1e-6)"
ESCAPED = "escaped (early checkpoint, nβ = 2000, γ = 0)"
NEGATIVE = "negative (early checkpoint, nβ = 2000, γ = 1000)"


def failure_cases(trained, early) -> dict:
    """``{case: (model, SGLD hyperparameters)}``: the trained model for the step-size failures, an early
    checkpoint (not a minimum) for the escape and the negative estimate. ``runaway_epsilon``: the step
    size of the planted chain (:func:`planted_runaway`)."""
    return {DIVERGED: (trained, dict(epsilon=1e-3, gamma=100.0, runaway_epsilon=0.03)),
            NOT_CONVERGED: (trained, dict(epsilon=1e-6, gamma=100.0)),
            ESCAPED: (early, dict(epsilon=1e-4, nbeta=2000.0, gamma=0.0)),
            NEGATIVE: (early, dict(epsilon=1e-4, nbeta=2000.0, gamma=1000.0))}


def run_failure_modes(cases: dict, loss_fn: Callable, data, sgld: SGLDConfig, **run) -> dict:
    """``estimate_llc`` on every case of :func:`failure_cases`: ``sgld`` (chains, draws, seed...) with the case's
    settings; ``run``: the estimator's run options.

    Returns ``{case: LLCResult}``; the warnings each case raised are in ``result.warnings``, not printed.
    """
    results = {}
    for name, (model, hp) in cases.items():
        hp = dict(hp)
        runaway = hp.pop("runaway_epsilon", None)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", LLCWarning)
            results[name] = (estimate_llc(model, loss_fn, data, sgld.replace(**hp), **run) if runaway is None else
                             planted_runaway(model, loss_fn, data, sgld.replace(**hp), runaway, **run))
    return results


def planted_runaway(model, loss_fn, data, sgld: SGLDConfig, runaway_epsilon: float, *, warn: bool = True,
                    **run) -> LLCResult:
    """``sgld.num_chains - 1`` chains at ``sgld`` and one more (the last chain id) at ``runaway_epsilon``, judged
    together (``result.combine``): the divergence rule must catch the odd one."""
    n = sgld.num_chains
    if n < 2:
        raise ValueError(f"num_chains must be at least 2 (healthy chains and the planted one), got {n!r}")
    healthy = estimate_llc(model, loss_fn, data, sgld.replace(num_chains=n - 1), warn=False, **run)
    planted = estimate_llc(model, loss_fn, data, sgld.replace(epsilon=runaway_epsilon), chain_ids=[n - 1], warn=False,
                           **run)
    return combine([healthy, planted], warn=warn)


def last_loss_gap(res: LLCResult) -> float:
    """Mean over the non-diverged chains of (loss at the last draw − L(w*)); negative: the chains escaped
    to lower loss. NaN if every chain diverged."""
    if res.num_ok == 0:
        return float("nan")
    return float(res.loss_trace[~res.diverged, -1].mean() - res.init_loss)


def short_warning(res: LLCResult, width: int = 90) -> str:
    """The result's warnings, each cut to ``width`` characters ('' if none)."""
    return "; ".join(w if len(w) <= width else w[:width - 1] + "…" for w in res.warnings)


def failure_table(results: dict) -> pd.DataFrame:
    """One row per case: λ̂ ± SE, diverged chains, the convergence heuristic, MALA acceptance, the last
    loss − L(w*), and the estimator's warning."""
    return pd.DataFrame([{"case": name, "λ̂": r.llc_mean, "SE": r.llc_se, "diverged chains": int(r.diverged.sum()),
                          "converged": converged(r), "MALA": r.mala_mean, "last loss − L(w*)": last_loss_gap(r),
                          "warning": short_warning(r)}
                         for name, r in results.items()]).set_index("case")


def recognised(results: dict) -> pd.DataFrame:
    """The failure page's own question of each case (columns question, answer, for its opening box): does the
    estimator flag it, and by which sign (chains marked diverged, traces not converged, a negative λ̂, a warning)?"""
    rows = []
    for name, r in results.items():
        signs = [f"{int(r.diverged.sum())} of {len(r.diverged)} chains marked diverged"] * bool(r.diverged.any())
        signs += ["not converged"] * (not converged(r)) + ["λ̂ negative"] * bool(r.llc_mean < 0)
        signs += ["a warning"] * bool(r.warnings)
        rows.append({"question": f"Does the estimator flag the case {name}?",
                     "answer": "yes: " + ", ".join(signs) if signs else "no"})
    return pd.DataFrame(rows, columns=["question", "answer"])


def finite_draw_mean(res: LLCResult) -> float:
    """What a hand-made estimate reports when it averages every finite draw, diverged chains included
    (``nanmean`` over the per-draw nβ·(L − L(w*))). NaN if no draw is finite."""
    finite = res.llc_trace[np.isfinite(res.llc_trace)]
    return float(finite.mean()) if finite.size else float("nan")


def diverged_summary(res: LLCResult) -> dict:
    """A case with diverged chains, as the page's sentence pastes it: ``diverged`` of ``chains`` chains; ``finite_mean``,
    what a hand-made mean over every finite draw reports; ``reported``, the estimator's λ̂ from the ``kept`` chains
    (``MISSING`` when none is left); ``warning``, the estimator's first warning ("none")."""
    return {"diverged": int(res.diverged.sum()), "chains": len(res.diverged), "finite_mean": f"{finite_draw_mean(res):.3g}",
            "reported": f"{res.llc_mean:.3g}" if res.num_ok else MISSING, "kept": int(res.num_ok),
            "warning": res.warnings[0] if res.warnings else "none"}
