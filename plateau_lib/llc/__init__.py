"""SGLD estimation of the local learning coefficient (LLC), model-agnostic.

Imports run one way: sampler -> estimator -> callbacks, calibration; result (no matplotlib) <- all;
plots (matplotlib) reads results and is imported on its own (``from plateau_lib.llc import plots``).

- :func:`estimate_llc`, :func:`estimate_llc_stacked` (estimator.py): the estimate at one w*, or at
  several checkpoints as one batched computation.
- :class:`LLCResult`, :func:`summarize`, the divergence rule (result.py): the estimate with its diagnostics.
- :func:`sgld_sample`, :func:`mala_acceptance_prob`, :func:`chain_seed` (sampler.py): the sequential and
  vmap backends.
- :func:`llc_over_checkpoints`, :class:`LLCCallback` (callbacks.py): LLC over training.
- :func:`calibration_sweep` (calibration.py); trace and sweep figures in plots.py.
- golden.py: models with closed-form learning coefficients, and :func:`golden.golden_estimates` for the page.
- transformer.py: the LLC page's small trained MWS transformer, its SGLD data and loss.
- failure_modes.py, mistakes.py: the four failure modes, and the mistakes of an LLC estimated by hand.
- page.py: the LLC page's settings table and provenance rows.
- plateau.py: λ̂ across the MWS plateau (its page, calibration, resumable CLI ``python -m plateau_lib.llc.plateau``).
"""
from .calibration import calibration_sweep
from .callbacks import LLCCallback, llc_over_checkpoints
from .estimator import default_nbeta, estimate_llc, estimate_llc_stacked
from .result import LLCResult, LLCWarning, summarize
from .sampler import chain_seed, mala_acceptance_prob, sgld_sample

__all__ = ["LLCResult", "LLCWarning", "default_nbeta", "estimate_llc", "estimate_llc_stacked", "summarize",
           "chain_seed", "mala_acceptance_prob", "sgld_sample", "llc_over_checkpoints", "LLCCallback",
           "calibration_sweep"]
