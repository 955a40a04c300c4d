import dataclasses
import math

import pytest

from plateau_lib import chapters
from plateau_lib.book import summaries
from plateau_lib.book.verdicts import AtLeast, BySeed, Claim, INF, VERDICTS, select

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
    # the same words at every seed are written once; the same number is still written per seed
    missed = Claim("Fig. X", "peak cosine", "≈ 0.95", (0.9, 1.0), (0.8, 1.0), missing="a run did not jump")
    assert missed.show(BySeed({1: math.nan, 2: math.nan})) == "a run did not jump (seeds 1 and 2)"
    assert COSINE.show(BySeed({0: 0.9, 1: 0.9})) == "0.9 and 0.9 (seeds 0 and 1)"  # a number at each: not a mean
    in_600 = dataclasses.replace(missed, missing="no jump in 600 steps")  # words with a number in them: once
    assert in_600.show(BySeed({0: math.nan, 1: math.nan, 2: math.nan})) == "no jump in 600 steps (seeds 0, 1 and 2)"
    tiny = Claim("Fig. X", "a rate", "≈ 0", (0.0, 1e-4), (0.0, 1e-3), fmt="{:.3g}")  # e-notation is a number too
    assert tiny.show(BySeed({0: 2e-5, 1: 2e-5})) == "2e-05 and 2e-05 (seeds 0 and 1)"
    (row,) = summaries.summary_rows([COSINE], "paper", {"peak cosine": BySeed({1: 0.5, 0: 0.95, 2: 0.92})})
    assert (row["ours"], row["verdict"], row["by seed"]) == (0.92, "partly", {"0": 0.95, "1": 0.5, "2": 0.92})
    with pytest.raises(ValueError, match="BySeed values"):
        BySeed({})


def test_a_lower_bound_survives_the_summary_file(tmp_path):
    """A seed's ratio known only from below (its run never jumped) is recorded as a lower bound and read back as
    one, so a reader of the JSON, and the page's nearest-edge table, see "≥" and not an exact number."""
    import json
    later = Claim("F", "jump ratio", "later", (2, INF), (1.3, INF))
    given = BySeed({0: AtLeast(2.73), 1: 1.5, 2: AtLeast(1.62)})
    (row,) = summaries.summary_rows([later], "paper", {"jump ratio": given})
    assert row["lower bounds"] == ["0", "2"] and row["shown"].startswith("≥ 2.73, 1.5 and ≥ 1.62")
    back = summaries.stored_value(json.loads(json.dumps(row)))
    assert isinstance(back.values[0], AtLeast) and isinstance(back.values[2], AtLeast)
    assert not isinstance(back.values[1], AtLeast) and later.judge(back, "paper") == row["verdict"]
    (single,) = summaries.summary_rows([later], "paper", {"jump ratio": AtLeast(3.0)})
    assert single["lower bounds"] == ["ours"] and isinstance(summaries.stored_value(single), AtLeast)
    (exact,) = summaries.summary_rows([later], "paper", {"jump ratio": 3.0})
    assert "lower bounds" not in exact and summaries.stored_value(exact) == 3.0


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
    from plateau_lib.book import pages, summaries as report
    from plateau_lib.book.verdicts import SANITY, Claim
    data_rho = Claim("Fig. X", "data ρ", "0.058", (0.05, 0.066), (0.05, 0.066), sanity="the data's own statistic")
    assert data_rho.judge(0.058, "paper") == SANITY[0] and data_rho.judge(0.2, "cpu") == SANITY[1]
    assert data_rho.judge(None, "paper") == SANITY[1]
    assert data_rho.rule().startswith("sanity check, passed if 0.05–0.066")
    table = pd.DataFrame({"cpu miniature": [f"0.058 ({SANITY[0]})", "1 (reproduced)"]})
    for column in list(report.PRESET_COLUMNS.values())[1:]:
        table[column] = "–"
    counts = pages.verdict_counts(table)
    assert counts.loc[list(VERDICTS), "cpu miniature"].sum() == 1 and counts.loc["reproduced", "cpu miniature"] == 1
    assert counts.loc[SANITY[0], "cpu miniature"] == 1  # counted apart
    by = pages.verdict_counts(table.assign(chapter=["a", "b"]), by="chapter")
    assert by.loc[("a", SANITY[0]), "cpu miniature"] == 1 and by.loc[("b", "reproduced"), "cpu miniature"] == 1
    tally = pages.tally(table.assign(chapter=["a", "b"]), by="chapter")
    html = pages.tally_html(tally).data  # each chapter a full-width row, then its kind of run with its counts
    assert html.count('class="tally-chapter"') == 2
    assert '<th colspan="8">a</th></tr><tr><td>cpu miniature</td><td class="">0</td>' in html
    assert '<th colspan="8">b</th></tr><tr><td>cpu miniature</td><td class="">1</td>' in html


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


def test_a_result_counted_under_another_figure_or_without_a_located_value_is_shown_and_never_tallied():
    """A duplicate (the same runs' measure, counted under another figure), a value that is the configuration
    itself, and a paper value no source confirms each read "…; shown, not counted" and enter no verdict count."""
    from plateau_lib.book import pages
    from plateau_lib.book.verdicts import NOT_COUNTED, Source, count_verdicts
    duplicate = Claim("Fig. Y", "peak cosine, baseline", "≈ 0.95", (0.9, 1.0), (0.8, 1.0),
                      counted_under="Fig. X: peak cosine")
    unsourced = Claim("Fig. Z", "wait", "≲ 100", (0, 100), (0, 200), source=Source("unconfirmed", "a README row"))
    config = Claim("Fig. X", "jump step", "within 400", (0, 400), (0, 600), not_counted="the run's own length")
    assert COSINE.judge(0.95, "paper") == "reproduced" and not COSINE.uncounted
    for claim in (duplicate, unsourced, config):
        assert claim.judge(0.95 if claim is duplicate else 50, "paper") == f"reproduced; {NOT_COUNTED}"
    assert duplicate.uncounted == "the same result is counted under Fig. X: peak cosine"
    assert "no available source" in unsourced.uncounted
    counts = count_verdicts(["reproduced", f"reproduced; {NOT_COUNTED}", f"partly; {NOT_COUNTED}"])
    assert counts["reproduced"] == 1 and counts["partly"] == 0 and counts[NOT_COUNTED] == 2
    (row,) = summaries.summary_rows([duplicate], "paper", {"peak cosine, baseline": 0.95})
    assert row["not counted"] == duplicate.uncounted
    box_tally = pages._tally([{"verdict": "reproduced"}, {"verdict": f"reproduced; {NOT_COUNTED}"}])
    assert box_tally == "1 reproduced; 1 shown only, not counted"


def test_counted_under_must_name_a_counted_claim(monkeypatch):
    from plateau_lib.plateau import claims as plateau_claims
    stray = Claim("Fig. Y", "copy", "≈ 0.95", (0.9, 1.0), (0.8, 1.0), counted_under="Fig. 2 (MWS plateau): no such")
    monkeypatch.setattr(plateau_claims, "CLAIMS", [*plateau_claims.CLAIMS, stray])
    with pytest.raises(ValueError, match="counted_under must name a counted claim"):
        chapters.claims()


def test_the_seeds_inside_the_band_are_counted_in_the_shown_value():
    (row,) = summaries.summary_rows([COSINE], "paper", {"peak cosine": BySeed({0: 0.95, 1: 0.85, 2: 0.92})})
    assert row["verdict"] == "partly" and row["shown"].endswith("(seeds 0, 1 and 2), 2 of 3 seeds reproduced")


def test_no_duplicate_or_unsourced_claim_is_counted_in_the_book():
    """The book's own faults of this kind (issue 52): Fig. 2's peak cosine counted again under Fig. 5 and Figs.
    41–42, Fig. 43's unconfirmed "≲ 100", Fig. 2's "jump within 400 steps" and softmax's "later" (the runs' own
    lengths), Fig. 2's final accuracy (a run of the authors' code, not the paper's), and Raventós's M = ∞ (a
    setting the paper never trains)."""
    uncounted = {(c.figure.split(" (")[0], c.metric) for c in CLAIMS if c.uncounted}
    assert {("Fig. 5", "peak cosine, baseline"), ("Figs. 41–42", "peak cosine before the jump, after the final layer norm"),
            ("Fig. 43", "steps from switch to jump, c = 10 at step 25–100 (max)"),
            ("Fig. 2", "step of the jump"), ("Fig. 2", "final accuracy"),
            ("Figs. 26–40", "softmax jump step ÷ linear baseline's"),
            ("Raventós Fig. 2", "Δᵀʳᵘᵉ(PT, ridge) ÷ D at M = ∞")} <= uncounted
    assert all(c.uncounted for c in CLAIMS if c.source and c.source.kind == "unconfirmed" and not c.sanity)


def test_a_verdict_a_perturbed_rerun_turns_is_marked_fragile():
    """The re-run's values are judged as the page's; a claim whose verdict turns is fragile, with both values, on
    the page's table and in the Reproducibility page's fragile list; one that holds is not."""
    from plateau_lib.book import pages
    jump = Claim("Fig. X", "jump step", "within 400", (0, 400), (0, 600))
    rows = summaries.summary_rows([COSINE, jump], "paper", {"peak cosine": 0.95, "jump step": 390.0},
                                  rerun={"peak cosine": 0.96, "jump step": 450.0})
    assert [r["fragile"] for r in rows] == [False, True]
    assert (rows[1]["verdict"], rows[1]["rerun verdict"], rows[1]["rerun"]) == ("reproduced", "partly", "450")
    summary = {"figure": "Fig. X", "preset": "paper", "page": "p", "rows": rows}
    table = summaries.reproducibility_table([COSINE, jump], {}, [summary])
    (turned,) = pages.fragile(table)["turned"]
    assert turned == "paper preset: reproduced → partly (390 → 450)"
    box = pages.verdict_box_html(["Fig. X"], {}, [summary])
    assert "reproduced (fragile: a re-run gives partly, 450)" in box and box.count("fragile") == 1


def test_the_rerun_coverage_counts_the_verdicts_a_rerun_checked():
    from plateau_lib.book import pages
    rows = summaries.summary_rows([COSINE], "cpu", {"peak cosine": 0.95}, rerun={"peak cosine": 0.96})
    found = [{"figure": "Fig. X (a figure)", "preset": "cpu", "rows": rows},
             {"figure": "Fig. X (a figure)", "preset": "paper", "rows": rows},
             {"figure": "Fig. Y (another)", "preset": "cpu", "rows": summaries.summary_rows([COSINE], "cpu", {"peak cosine": 0.9})}]
    assert pages.rerun_coverage(found) == (2, "Fig. X (cpu miniature, paper preset)")


def test_steps_a_sentence_names_carry_their_noun():
    from plateau_lib.book.verdicts import steps_listed
    assert steps_listed([80_807, 202_019, 308_080]) == "steps 80,807, 202,019 and 308,080"
    assert steps_listed([4]) == "step 4" and steps_listed([]) == "no step" and steps_listed([], "none") == "none"


def test_a_value_next_to_a_band_edge_is_written_apart_from_it():
    """0.899 under a band from 0.9 is written 0.899, not 0.90 (which would read as inside); elsewhere the format."""
    two = Claim("Fig. X", "peak cosine", "> 0.9", (0.9, 1.0), (0.75, 1.0), fmt="{:.2f}")
    assert two.show(0.899) == "0.899" and two.judge(0.899, "paper") == "partly"
    assert two.show(0.8996) == "0.8996" and two.show(0.95) == "0.95" and two.show(0.9) == "0.90"
    share = Claim("Fig. X", "variance explained", "27.5%", (0.2, 0.35), (0.1, 0.5), fmt="{:.1%}")
    assert share.show(0.1996) == "19.96%" and share.show(0.25) == "25.0%"
    near_zero = Claim("Fig. X", "Δ ÷ D", "≈ 0", (0, 0.01), (0, 0.03), fmt="{:.4f}")
    assert near_zero.show(0.00002) == "0.0000"  # written as the edge of the band it is in: nothing to tell apart
    step = Claim("Fig. X", "peak step", "≈ 40k", (25_000, 65_000), (10_000, 130_000), fmt="{:,.0f}")
    assert step.show(24_999.7) == "24,999.7" and step.show(40_292) == "40,292"
