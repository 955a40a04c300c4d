"""SGLD estimation of the local learning coefficient (LLC), model-agnostic.

- :func:`estimate_llc` -> :class:`LLCResult` (estimator.py): the estimate with its diagnostics.
- :func:`sgld_sample`, :func:`mala_acceptance_prob`, :func:`chain_seed` (sampler.py): batched SGLD.
- :func:`llc_over_checkpoints`, :class:`LLCCallback` (callbacks.py): LLC over training.
- :func:`calibration_sweep`, :func:`plot_traces`, :func:`plot_sweep` (calibration.py).
- golden.py: models with closed-form learning coefficients, and :func:`golden.golden_estimates` for the page.
- transformer.py: the LLC page's small trained MWS transformer, its SGLD data and loss.
- failure_modes.py, mistakes.py: the four failure modes, and the mistakes of an LLC estimated by hand.
- plots.py, page.py: the LLC page's figures, settings table and provenance rows.
"""
from .estimator import LLCResult, LLCWarning, default_nbeta, estimate_llc
from .sampler import chain_seed, mala_acceptance_prob, sgld_sample

__all__ = ["LLCResult", "LLCWarning", "default_nbeta", "estimate_llc", "chain_seed", "mala_acceptance_prob",
           "sgld_sample", "llc_over_checkpoints", "LLCCallback", "calibration_sweep", "plot_traces", "plot_sweep"]


def __getattr__(name):  # lazy: callbacks/calibration pull in tqdm/matplotlib
    if name in ("llc_over_checkpoints", "LLCCallback"):
        from . import callbacks
        return getattr(callbacks, name)
    if name in ("calibration_sweep", "plot_traces", "plot_sweep"):
        from . import calibration
        return getattr(calibration, name)
    raise AttributeError(name)
