"""The in-context regression chapter's claims measured on a model that has learned nothing: Hoogland et al.'s
config (``ICL_PAPER``) never updated (``engine.train.untrained``), through the stages page's own code. A finding
must fail here (``book.verdicts``)."""
from __future__ import annotations

from plateau_lib.engine.train import untrained
from plateau_lib.icl import stages_page
from plateau_lib.icl.presets import ICL_PAPER


def values() -> dict:
    """``{figure: {claim metric: value}}``: the claims a training run decides without λ̂ (the λ̂ claims' baseline,
    λ̂ of the untrained model, is not computed here: about ten CPU-minutes a row)."""
    return {stages_page.FIGURE: stages_page.training_values(untrained(ICL_PAPER).metrics)}
