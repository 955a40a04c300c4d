"""SGLD estimation of the local learning coefficient (LLC), model-agnostic.

Imports run one way: sampler -> config -> estimator -> callbacks, calibration; result (no matplotlib) <- all;
plots (matplotlib) reads results and is imported on its own (``from plateau_lib.llc import plots``).

- :class:`SGLDConfig` (config.py): the SGLD settings of an estimate, typed and validated; presets are SGLDConfigs.
- :func:`estimate_llc`, :func:`estimate_llc_stacked` (estimator.py): the estimate at one w*, or at
  several checkpoints as one batched computation.
- :class:`LLCResult`, :func:`summarize`, the divergence rule (result.py): the estimate with its diagnostics.
- :func:`sgld_sample`, :func:`mala_acceptance_prob`, :func:`chain_seed` (sampler.py): the sequential and
  vmap backends.
- :func:`llc_over_checkpoints`, :class:`LLCCallback` (callbacks.py): LLC over training.
- :func:`calibration_sweep` (calibration.py); trace and sweep figures in plots.py.
- golden.py: models with closed-form learning coefficients, and :func:`golden.golden_estimates` for the page.
- dln.py: deep linear networks and their closed-form learning coefficient (Aoyagi 2024), at any size.
- failure_modes.py, mistakes.py: the four failure modes, and the mistakes of an LLC estimated by hand.
- calibration_page.py: the LLC page's settings table and provenance rows; presets.py and claims.py: its settings and claims.
- The small MWS transformer these pages estimate on, and λ̂ across the MWS plateau, are the plateau chapter's
  (``plateau_lib.plateau.llc_transformer``, ``plateau_lib.plateau.llc_across``).
"""
from plateau_lib.llc.calibration import calibration_sweep
from plateau_lib.llc.callbacks import LLCCallback, llc_over_checkpoints
from plateau_lib.llc.config import SGLDConfig
from plateau_lib.llc.estimator import default_nbeta, estimate_llc, estimate_llc_stacked
from plateau_lib.llc.result import LLCResult, LLCWarning, summarize
from plateau_lib.llc.sampler import chain_seed, mala_acceptance_prob, sgld_sample

__all__ = ["SGLDConfig", "LLCResult", "LLCWarning", "default_nbeta", "estimate_llc", "estimate_llc_stacked",
           "summarize", "chain_seed", "mala_acceptance_prob", "sgld_sample", "llc_over_checkpoints", "LLCCallback",
           "calibration_sweep"]
