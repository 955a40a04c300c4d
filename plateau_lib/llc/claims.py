"""The LLC calibration page's claims: λ̂ against closed-form learning coefficients."""
from __future__ import annotations

from plateau_lib.book.verdicts import Band, Claim, Source, select, sourced
from plateau_lib.llc import dln

_LLC = "LLC golden models"

CLAIMS = [
    # The estimator against closed-form learning coefficients: λ̂ / λ. The `paper` column runs devinterp's own tests;
    # it has none for a regular model, so that row's model and setting are this book's and it is not counted.
    *[Claim(_LLC, f"λ̂ ÷ λ, {case}", f"1 (λ = {lam})", (0.9, 1.1), (0.75, 1.25), fmt="{:.2f}",
            no_baseline="a check of the estimator against a closed-form λ: no model is trained, so none is untrained",
            not_counted=uncounted)
      for case, lam, uncounted in [
          ("polynomial (0, 1)", "1/2", ""), ("polynomial (0, 2)", "1/4", ""), ("polynomial (0, 3)", "1/6", ""),
          ("polynomial (1, 2), a hard case", "1/4", ""), ("reduced-rank regression 5,3,5", "exact", ""),
          ("reduced-rank regression 3,8,4", "exact", ""),
          ("regular model d = 10", "5", "devinterp has no regular-model test: this model and its SGLD setting are "
                                         "the book's own")]],
]

# Where each paper value comes from (book.verdicts.Source): the paper's text, a figure, the authors' code or
# logged data (the reference notes in ../shared/reference), or this book's inference.
SOURCES = {
    'λ̂ ÷ λ, polynomial (0, 1)': Source('code', 'timaeus-research/devinterp @ a646b9d (v1.3.2), tests/slt/sampler_accuracy_test.py (true_lc)',
        'Test table (true_lc): (0,1)→1/2, (1,1)→1/2 (m=2), (0,2)→1/4, (1,2)→1/4'),
    'λ̂ ÷ λ, polynomial (0, 2)': Source('code', 'timaeus-research/devinterp @ a646b9d (v1.3.2), tests/slt/sampler_accuracy_test.py (true_lc)',
        'Test table (true_lc): (0,1)→1/2, (1,1)→1/2 (m=2), (0,2)→1/4, (1,2)→1/4'),
    'λ̂ ÷ λ, polynomial (0, 3)': Source('code', 'timaeus-research/devinterp @ a646b9d (v1.3.2), tests/slt/sampler_accuracy_test.py (true_lc)',
        '(0,3)→1/6, (1,3)→1/6, (2,3)→1/6, (3,3)→1/6 (m=2). The test writes 0.166.'),
    'λ̂ ÷ λ, polynomial (1, 2), a hard case': Source('code', 'timaeus-research/devinterp @ a646b9d (v1.3.2), tests/slt/sampler_accuracy_test.py (true_lc)',
        'Test table (true_lc): (0,1)→1/2, (1,1)→1/2 (m=2), (0,2)→1/4, (1,2)→1/4'),
    'λ̂ ÷ λ, reduced-rank regression 5,3,5': Source('code', 'timaeus-research/devinterp @ a646b9d (v1.3.2), tests/slt/rrr_test.py (Aoyagi & Watanabe)',
        'Test cases (M,H,N): (5,3,5)→6.5, (5,4,5)→8.0'),
    'λ̂ ÷ λ, reduced-rank regression 3,8,4': Source('code', 'timaeus-research/devinterp @ a646b9d (v1.3.2), tests/slt/rrr_test.py (Aoyagi & Watanabe)',
        '(3,8,4)→6.0 (case 4) … case 4, M+N < H+r: λ = MN/2'),
    'λ̂ ÷ λ, regular model d = 10': Source('text', 'Hoogland et al. §A.2; regular λ = d/2 (Watanabe)',
        'If the population loss looks like a quadratic form near [w*] then [λ] is half the number of parameters'),
}
# Where the bands come from (book.verdicts.Band): ± 10% of the exact λ, tighter than the authors' own tests (rtol
# 0.4 for reduced-rank regression, ± 3.5 chain sd for the polynomials: devinterp.md §7).
_TEN_PERCENT = Band("tolerance", "± 10% of the exact λ (the authors' tests allow rtol 0.4 or ± 3.5 chain sd)")
BANDS = {metric: _TEN_PERCENT for metric in SOURCES}
CLAIMS = sourced(CLAIMS, SOURCES, BANDS)


# Deep linear networks (plateau_lib.llc.dln): λ̂ with the papers' sampler, plain SGLD, against Aoyagi's closed-form λ
# at sizes up to the book's models and beyond (RMSProp-SGLD is shown beside it on the page, not judged).
DLN_FIGURE = "LLC deep linear networks"
DLN_CLAIMS = [Claim(DLN_FIGURE, dln.dln_metric(case), f"1 (λ = {dln.dln_lambda(*dln.DLN_CASES[case]):g}, exact)",
                    (0.9, 1.1), (0.75, 1.25), fmt="{:.2f}",
                    no_baseline="a check of the estimator against a closed-form λ: no model is trained")
              for case in dln.DLN_CASES]
DLN_SOURCE = Source("text", "Aoyagi 2024, Theorem 1: the learning coefficient of a deep linear network in closed "
                            "form, the check Furman & Lau 2024 (arXiv 2402.03698) run at scale",
                    "λ = (−r² + r(H₀ + H_L))/2 + a(ℓ − a)/(4ℓ) − ℓ(ℓ − 1)/4 · (Σ_S M_i / ℓ)² + ½ Σ_{i<j in S} M_i M_j")
CLAIMS += sourced(DLN_CLAIMS, {c.metric: DLN_SOURCE for c in DLN_CLAIMS}, {c.metric: _TEN_PERCENT for c in DLN_CLAIMS})

# Why a figure's `paper` column is empty where no page recorded a value or a status (summaries.record_status).
PAPER_PENDING = {
    DLN_FIGURE: "no paper's model or setting; a check of the estimator against the exact λ of deep linear networks, "
                "at an SGLD setting of this book's choosing",
}


def claims_of(figure: str) -> list[Claim]:
    """The claims of one of this chapter's figures, in the order its page reports them."""
    return select(CLAIMS, figure)
