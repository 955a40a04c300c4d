import math

import pytest

from plateau_lib import chapters
from plateau_lib.book import summaries
from plateau_lib.book.verdicts import BySeed, Claim, INF, VERDICTS, select

CLAIMS = chapters.claims()

COSINE = Claim("Fig. X", "peak cosine", "≈ 0.95", (0.9, 1.0), (0.8, 1.0))
JUMP = Claim("Fig. X", "jump step", "within 400", (0, 400), (0, 600), scale_bound=True, missing_as=INF)


def test_bands_give_the_verdicts():
    assert COSINE.judge(0.95, "cpu") == "reproduced"
    assert COSINE.judge(0.9, "paper") == "reproduced"  # closed bands
    assert COSINE.judge(0.85, "paper") == "partly"
    assert COSINE.judge(0.5, "paper") == "not reproduced"
    assert COSINE.judge(None, "paper") == "not reproduced" and COSINE.judge(math.nan, "cpu") == "not reproduced"


def test_scale_bound_claims_are_not_judged_on_the_miniature():
    assert JUMP.judge(200, "cpu") == "not comparable at this scale"
    assert JUMP.judge(200, "paper") == "reproduced" and JUMP.judge(500, "paper") == "partly"
    assert JUMP.judge(None, "paper") == "not reproduced"  # missing = later than the run = inf


def test_the_papers_data_with_a_smaller_model_is_judged_except_where_the_model_sets_the_number():
    """The CPU transient sweep (Carroll's data, width 64) is judged by the paper's bands on a scale-bound claim,
    but not on a model-bound one (where the switch M falls depends on the width)."""
    switch = Claim("Fig. X", "switch M", "182–362", (182, 362), (128, 512), scale_bound=True, model_bound=True)
    assert JUMP.judge(200, "paper_data") == "reproduced" and JUMP.judge(700, "paper_data") == "not reproduced"
    assert switch.judge(256, "paper_data") == "not comparable at this scale"
    assert switch.judge(256, "paper") == "reproduced" and switch.judge(256, "cpu") == "not comparable at this scale"
    assert switch.rule().endswith("not comparable below the paper's model")
    with pytest.raises(ValueError, match="'paper_data'"):
        JUMP.judge(1.0, "gpu")


def test_several_seeds_are_judged_one_by_one_and_never_averaged():
    """A seed that misses the band makes the claim at most partly, however well the median sits; seeds that all
    miss make it not reproduced; "ours" is the median, and each seed's value is shown and kept."""
    assert COSINE.judge(BySeed({0: 0.95, 2: 0.92}), "paper") == "reproduced"
    assert COSINE.judge(BySeed({0: 0.95, 1: 0.5, 2: 0.92}), "paper") == "partly"  # the median 0.92 would pass
    assert COSINE.judge(BySeed({0: 0.5, 1: 0.85}), "paper") == "partly"
    assert COSINE.judge(BySeed({0: 0.5, 1: math.nan}), "paper") == "not reproduced"
    assert float(BySeed({0: 0.95, 1: 0.5, 2: 0.92})) == 0.92 and math.isnan(float(BySeed({3: math.nan})))
    assert COSINE.show(BySeed({2: 0.92, 0: 0.95, 1: 0.5})) == "0.95, 0.5 and 0.92 (seeds 0, 1 and 2)"
    assert COSINE.show(BySeed({1: 0.5})) == "0.5 (seed 1)"
    (row,) = summaries.summary_rows([COSINE], "paper", {"peak cosine": BySeed({1: 0.5, 0: 0.95, 2: 0.92})})
    assert (row["ours"], row["verdict"], row["by seed"]) == (0.92, "partly", {"0": 0.95, "1": 0.5, "2": 0.92})
    with pytest.raises(ValueError, match="BySeed values"):
        BySeed({})


def test_rule_and_show():
    assert COSINE.rule() == "reproduced if 0.9–1, partly if 0.8–1"
    assert JUMP.rule().startswith("reproduced if ≤ 400, partly if ≤ 600")
    assert Claim("F", "m", "p", (2, INF), (1.25, INF)).rule() == "reproduced if ≥ 2, partly if ≥ 1.25"
    assert COSINE.show(0.96123) == "0.961" and COSINE.show(None) == "not reached"


def test_bad_preset_and_unknown_figure():
    with pytest.raises(ValueError, match="preset"):
        COSINE.judge(1.0, "gpu")
    with pytest.raises(ValueError, match="figure must be one of"):
        select(CLAIMS, "Fig. 99")


def test_every_claim_is_consistent():
    assert VERDICTS == ("reproduced", "partly", "not reproduced", "not comparable at this scale")
    seen = set()
    for c in CLAIMS:
        assert (c.figure, c.metric) not in seen, f"duplicate claim {c.metric}"
        seen.add((c.figure, c.metric))
        (lo, hi), (plo, phi) = c.reproduced, c.partly
        assert plo <= lo <= hi <= phi, f"{c.metric}: the partly band must contain the reproduced band"


def test_a_sanity_check_is_judged_apart_and_never_tallied():
    import pandas as pd
    from plateau_lib.book import pages
    from plateau_lib.book.verdicts import SANITY, Claim
    data_rho = Claim("Fig. X", "data ρ", "0.058", (0.05, 0.066), (0.05, 0.066), sanity="the data's own statistic")
    assert data_rho.judge(0.058, "paper") == SANITY[0] and data_rho.judge(0.2, "cpu") == SANITY[1]
    assert data_rho.judge(None, "paper") == SANITY[1]
    assert data_rho.rule().startswith("sanity check, passed if 0.05–0.066")
    table = pd.DataFrame({"cpu miniature": [f"0.058 ({SANITY[0]})", "1 (reproduced)"]})
    for column in ("long CPU run", "paper's data, smaller model", "trained here in the paper's model shapes",
                   "paper preset"):
        table[column] = "–"
    counts = pages.verdict_counts(table)
    assert counts.loc[list(VERDICTS), "cpu miniature"].sum() == 1 and counts.loc["reproduced", "cpu miniature"] == 1
    assert counts.loc[SANITY[0], "cpu miniature"] == 1  # counted apart
    by = pages.verdict_counts(table.assign(chapter=["a", "b"]), by="chapter")
    assert by.loc[("a", SANITY[0]), "cpu miniature"] == 1 and by.loc[("b", "reproduced"), "cpu miniature"] == 1
    tally = pages.tally(table.assign(chapter=["a", "b"]), by="chapter")
    html = pages.tally_html(tally).data  # each chapter a full-width row, then its kind of run with its counts
    assert html.count('class="tally-chapter"') == 2
    assert '<th colspan="7">a</th></tr><tr><td>cpu miniature</td><td class="">0</td>' in html
    assert '<th colspan="7">b</th></tr><tr><td>cpu miniature</td><td class="">1</td>' in html


def test_the_plateau_chapter_has_no_claim_an_untrained_model_passes_outside_its_sanity_checks():
    """Fig. 2's sanity checks are the data's ρ and the APM at step 0; the APM is judged at the end of the plateau."""
    from plateau_lib.plateau.claims import claims_of
    fig2 = {c.metric: c for c in claims_of("Fig. 2 (MWS plateau)")}
    assert {m for m, c in fig2.items() if c.sanity} == {"data ρ", "APM at step 0"}
    apm = fig2["APM at the end of the plateau (the last evaluation before the jump)"]
    assert apm.judge(0.0, "paper") == "not reproduced" and apm.judge(0.49, "paper") == "not reproduced"
    assert "peak cosine, c = 1" not in {c.metric for c in claims_of("Figs. 3–4 (attention bias)")}


def test_a_one_value_band_reads_as_that_value():
    from plateau_lib.book.verdicts import Claim
    assert Claim("Fig. X", "count", "5", (5, 5), (4, 6)).rule() == "reproduced if = 5, partly if 4–6"


def test_the_nearest_edge_is_one_the_books_bands_set_never_the_measures_own_bound():
    """Reproduced 0.9–1, partly 0.8–1: the shared edge 1 (a cosine's bound) is no edge of the book's; ours 0.95
    is 0.05 / 0.9 from the 0.9 edge. A ratio read as ≤ 0.5 (partly ≤ 0.8): 0.67 is 0.13 / 0.8 from the 0.8 edge.
    Seeds: the nearest seed's. No value, or bands whose only finite edges are shared or zero: no edge."""
    cosine = Claim("Fig. X", "cosine", "≈ 0.95", (0.9, 1.0), (0.8, 1.0))
    edge, distance = cosine.nearest_edge(0.95)
    assert edge == 0.9 and distance == pytest.approx(0.05 / 0.9)
    assert cosine.nearest_edge(1.0) == (0.9, pytest.approx(0.1 / 0.9))
    ratio = Claim("Fig. X", "ratio", "much faster", (0, 0.5), (0, 0.8))
    assert ratio.nearest_edge(0.67) == (0.8, pytest.approx(0.13 / 0.8))
    assert ratio.nearest_edge(BySeed({0: 0.3, 1: 0.52})) == (0.5, pytest.approx(0.02 / 0.5))
    assert all(math.isnan(x) for x in ratio.nearest_edge(None))
    assert all(math.isnan(x) for x in Claim("Fig. X", "m", "> 0", (0, INF), (0, INF)).nearest_edge(3.0))
