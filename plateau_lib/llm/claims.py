"""The Pythia/OLMo chapter's claims (Gopalani et al. Figs. 8, 23-25)."""
from __future__ import annotations

from plateau_lib.book.verdicts import Band, Claim, Source, select, sourced

_LLM = "Fig. 8 (Pythia/OLMo collapse and repetition)"
_OLMO = "Figs. 23–25 (OLMo-2 7B, steps 150 and 600)"

CLAIMS = [
    # Gopalani et al. Figs. 8, 23-25 (reference pythia_olmo.md): early pretraining checkpoints. The claim is
    # qualitative (collapse and repetition early, both fading), so a miniature trained here is judged by it; the
    # paper's exact values belong to its models (Pythia: cosine > 0.9 early; OLMo-2 7B: 0.93 at step 150, 0.43 at 600).
    Claim(_LLM, "peak cosine of the generated tokens' states", "> 0.9 early (OLMo-2 7B: 0.93 at step 150)",
          (0.9, 1.0), (0.75, 1.0), fmt="{:.2f}"),
    Claim(_LLM, "repetition at the step of peak cosine", "high: greedy output repeats", (0.5, 1.0), (0.2, 1.0),
          fmt="{:.2f}"),
    # The summary gives Pythia only an early peak; the fall is read across from OLMo-2 7B's two checkpoints.
    Claim(_LLM, "cosine at the last step ÷ its peak",
          "falls (no later Pythia value is given; OLMo-2 7B falls 0.93 → 0.43)", (0, 0.6), (0, 0.85), fmt="{:.2f}"),
    # "Fades" as a fall from the peak: a model that never repeats (an untrained one) has ≈ 0 repetition at every step.
    Claim(_LLM, "repetition at the last step ÷ at the step of peak cosine", "fades (Present → Dissipated)", (0, 0.2),
          (0, 0.5), fmt="{:.2f}", missing="no repetition at the peak"),
    # OLMo-2 7B's two stage-1 checkpoints. When a miniature collapses and when it recovers depend on its batch and
    # schedule, so neither its value at step 150 nor its fall between OLMo's two steps is comparable (the miniature
    # peaks near step 64); the step-free fall, last ÷ peak, is Fig. 8's claim above.
    Claim(_OLMO, "cosine at step 150", "0.93", (0.85, 1.0), (0.7, 1.0), scale_bound=True, fmt="{:.2f}",
          missing="no checkpoint at step 150"),
    Claim(_OLMO, "cosine at step 600 ÷ at step 150", "0.46 (0.43 ÷ 0.93)", (0, 0.6), (0, 0.85), scale_bound=True,
          fmt="{:.2f}", missing="no checkpoint at step 150 or 600"),
]

# Where each paper value comes from (book.verdicts.Source): the paper's text, a figure, the authors' code or
# logged data (the reference notes in ../shared/reference), or this book's inference.
SOURCES = {
    "peak cosine of the generated tokens' states": Source('summary', 'Gopalani et al. summary, LLM Validation',
        'Pythia-14M | > 0.9 | Present'),
    'repetition at the step of peak cosine': Source('summary', 'Gopalani et al. summary, LLM Validation',
        'Model | Early Peak COS | Repetition Bias'),
    'cosine at the last step ÷ its peak': Source('inference', 'Gopalani et al. summary, LLM Validation (OLMo-2 rows)',
        'OLMo-2 7B (step 600) | ≈ 0.43 | Dissipated'),
    'repetition at the last step ÷ at the step of peak cosine': Source('inference', 'Gopalani et al. summary, LLM Validation',
        'OLMo-2 7B (step 600) | ≈ 0.43 | Dissipated'),
    'cosine at step 150': Source('summary', 'Gopalani et al. summary, LLM Validation',
        'OLMo-2 7B (step 150) | ≈ 0.93 | Present'),
    'cosine at step 600 ÷ at step 150': Source('summary', 'Gopalani et al. summary, LLM Validation',
        'OLMo-2 7B (step 600) | ≈ 0.43 | Dissipated'),
}
# Where each band comes from (book.verdicts.Band).
BANDS = {
    "peak cosine of the generated tokens' states": Band("paper", "the summary's bound, > 0.9"),
    "repetition at the step of peak cosine": Band("reading", "“high” repetition read as at least half the tokens"),
    "cosine at the last step ÷ its peak": Band(
        "reading", "“falls” read as under 0.6 of the peak (OLMo-2 7B's is 0.46)"),
    "repetition at the last step ÷ at the step of peak cosine": Band(
        "reading", "“dissipated” read as under a fifth of the repetition at the peak"),
    "cosine at step 150": Band("tolerance", "0.85–1 around the summary's 0.93"),
    "cosine at step 600 ÷ at step 150": Band("tolerance", "under 0.6, around the summary's 0.46"),
}

CLAIMS = sourced(CLAIMS, SOURCES, BANDS)

# Why a figure's `paper` column is empty where no page recorded a value or a status (summaries.record_status).
PAPER_PENDING = {
    _LLM: "needs the real Pythia checkpoints (not offline); the models trained here in its shape have their own column",
    _OLMO: "needs the real OLMo-2 7B checkpoints (not offline)",
}


def claims_of(figure: str) -> list[Claim]:
    """The claims of one of this chapter's figures, in the order its page reports them."""
    return select(CLAIMS, figure)
