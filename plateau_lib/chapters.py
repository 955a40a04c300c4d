"""The chapter registry: the book's chapters in book order, and what each owns (its presets' ``page_runs``, its
analyses after training, its claims and the reasons its paper columns are pending). The paper queue (``plateau_lib.paper_queue``) and the
Reproducibility page read the chapters through here; nothing below this module imports it.

Adding a page: its chapter package (presets, claims, page code), its notebook, ``_toc.yml``, and, for a new
chapter, one line in ``CHAPTERS``.
"""
from __future__ import annotations

import importlib
import importlib.util

from plateau_lib.book.verdicts import Claim

# chapter package -> what it holds, in book order (the parts of ``_toc.yml``)
CHAPTERS = {
    "plateau": "The loss plateau (Gopalani et al.): MWS and other tasks, attention bias, optimal init, probe, λ̂",
    "llm": "Pythia/OLMo-2 collapse and repetition (Gopalani et al. Figs. 8, 23-25)",
    "icl": "In-context linear regression (Hoogland et al.; Raventós et al.; Carroll et al.)",
    "llc": "The LLC estimator against closed-form learning coefficients (Methods)",
}


def _module(chapter: str, name: str):
    if chapter not in CHAPTERS:
        raise ValueError(f"unknown chapter {chapter!r}; allowed: {list(CHAPTERS)}")
    return importlib.import_module(f"plateau_lib.{chapter}.{name}")


def page_runs(preset: str = "paper") -> dict:
    """``{page: {label: TrainConfig}}``: every chapter's default runs for ``preset`` (the paper queue's list)."""
    runs = {}
    for chapter in CHAPTERS:
        presets = _module(chapter, "presets")
        if hasattr(presets, "page_runs"):
            runs.update(presets.page_runs(preset))
    return runs


def analyses(preset: str = "paper") -> list:
    """Every chapter's steps after training for ``preset`` (``engine.analysis.Analysis``), in book order: the
    chapters with an ``analyses`` module declare them there."""
    found = []
    for chapter in CHAPTERS:
        if importlib.util.find_spec(f"plateau_lib.{chapter}.analyses") is not None:
            found += _module(chapter, "analyses").analyses(preset)
    return found


def claims() -> list[Claim]:
    """Every chapter's claims, in book order; ValueError naming a claim shown under one figure whose
    ``counted_under`` names no counted claim ("figure: metric")."""
    found = [c for chapter in CHAPTERS for c in _module(chapter, "claims").CLAIMS]
    counted = {f"{c.figure}: {c.metric}" for c in found if not c.uncounted and not c.sanity}
    stray = [f"{c.figure}: {c.metric}" for c in found if c.counted_under and c.counted_under not in counted]
    if stray:
        raise ValueError(f"counted_under must name a counted claim ('figure: metric'); {stray} name none")
    return found


def untrained_values() -> dict:
    """``{figure: {claim metric: value}}``: the claims measured on models that have learned nothing (each chapter's
    ``untrained`` module: its paper configs never updated, through its pages' own code). A finding must come out
    *not reproduced* there; the claims missing here say why (``Claim.no_baseline``) or wait for theirs."""
    found = {}
    for chapter in CHAPTERS:
        if importlib.util.find_spec(f"plateau_lib.{chapter}.untrained") is not None:
            found.update(_module(chapter, "untrained").values())
    return found


# The paper each chapter's figures reproduce; a chapter of several papers names each figure's in its claims module
# (``PAPER_OF``).
PAPERS = {"plateau": "Gopalani et al. 2025", "llm": "Gopalani et al. 2025", "icl": None,
          "llc": "The LLC estimator's known answers (devinterp's tests; Aoyagi 2024)"}


def paper_of() -> dict:
    """``{figure: the paper it reproduces}`` for every chapter's claims (the Reproducibility page's tally)."""
    out = {}
    for chapter, paper in PAPERS.items():
        claims = _module(chapter, "claims")
        named = getattr(claims, "PAPER_OF", {})
        for c in claims.CLAIMS:
            if c.figure not in named and paper is None:
                raise ValueError(f"figure {c.figure!r} of chapter {chapter!r} names no paper (its PAPER_OF)")
            out[c.figure] = named.get(c.figure, paper)
    return out


def paper_pending() -> dict:
    """``{figure: why its paper column is empty}`` of every chapter."""
    return {k: v for chapter in CHAPTERS for k, v in _module(chapter, "claims").PAPER_PENDING.items()}
