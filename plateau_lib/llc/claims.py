"""The LLC calibration page's claims: λ̂ against closed-form learning coefficients."""
from __future__ import annotations

from plateau_lib.book.verdicts import Claim, select

_LLC = "LLC golden models"

CLAIMS = [
    # The estimator against closed-form learning coefficients: λ̂ / λ.
    *[Claim(_LLC, f"λ̂ ÷ λ, {case}", f"1 (λ = {lam})", (0.9, 1.1), (0.75, 1.25), fmt="{:.2f}")
      for case, lam in [("polynomial (0, 1)", "1/2"), ("polynomial (0, 2)", "1/4"), ("polynomial (0, 3)", "1/6"),
                        ("polynomial (1, 2), a hard case", "1/4"), ("reduced-rank regression 5,3,5", "exact"),
                        ("reduced-rank regression 3,8,4", "exact"), ("regular model d = 10", "5")]],
]

# Why a figure's `paper` column is empty where no page recorded a value or a status (summaries.record_status).
PAPER_PENDING = {

}


def claims_of(figure: str) -> list[Claim]:
    """The claims of one of this chapter's figures, in the order its page reports them."""
    return select(CLAIMS, figure)
