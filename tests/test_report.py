import json

import pytest

from plateau_lib import chapters
from plateau_lib.book import summaries as report
from plateau_lib.book.verdicts import select
from plateau_lib.engine import utils

CLAIMS, PAPER_PENDING = chapters.claims(), chapters.paper_pending()


def claims_of(figure):
    return select(CLAIMS, figure)

FIG = "Fig. 2 (MWS plateau)"


@pytest.fixture
def summaries(tmp_path, monkeypatch):
    monkeypatch.setenv("PLATEAU_SUMMARIES", str(tmp_path / "summaries"))
    return tmp_path / "summaries"


def test_summary_rows_carry_verdicts_and_rules():
    rows = report.summary_rows(claims_of(FIG), "cpu", {"peak cosine before the jump": 0.97, "step of the jump": float("nan")})
    assert [r["metric"] for r in rows] == ["peak cosine before the jump", "step of the jump"]
    assert rows[0]["verdict"] == "reproduced" and rows[0]["shown"] == "0.97" and rows[0]["paper"] == "≈ 0.95"
    assert rows[1]["ours"] is None and rows[1]["shown"] == "no jump in the run"
    # the jump's step is the configured run's length, not a paper value: shown, never counted
    assert rows[1]["verdict"] == "not comparable at this scale; shown, not counted"
    assert report.summary_rows(claims_of(FIG), "paper", {"step of the jump": None})[0]["verdict"] == \
        "not reproduced; shown, not counted"


def test_unknown_metric_is_refused():
    with pytest.raises(ValueError, match="no claim named"):
        report.summary_rows(claims_of(FIG), "cpu", {"peak cosinus": 0.9})


def test_record_and_load_in_the_build_folder(summaries):
    path = report.record_summary(claims_of(FIG), "cpu", {"peak cosine before the jump": 0.95}, "mws_plateau", {"device": "cpu"})
    assert path.parent == summaries
    summary = json.loads(path.read_text())
    assert summary["rows"][0]["verdict"] == "reproduced" and summary["page"] == "mws_plateau"
    assert summary["date"].endswith("+00:00") and summary["commit"]
    assert [s["figure"] for s in report.load_summaries()] == [FIG]


def test_reproducibility_table_is_wide_and_in_book_order(summaries):
    report.record_summary(claims_of("Fig. 5 (optimal initialisation)"), "cpu", {"peak cosine, baseline": 0.99},
                          "mws_optimal_init", {})
    report.record_summary(claims_of(FIG), "paper", {"peak cosine before the jump": 0.95}, "mws_plateau", {})
    report.record_summary(claims_of(FIG), "cpu", {"peak cosine before the jump": 0.5}, "mws_plateau", {})
    table = report.reproducibility_table(CLAIMS, PAPER_PENDING)
    assert list(table.columns) == ["figure", "metric", "paper", "paper value from", "quote", "bands from", "band kind",
                                   "cpu miniature", "long CPU run", "paper's data, smaller model",
                                   "trained here in the paper's model shapes", "estimator check, this book's setting",
                                   "paper preset",
                                   "untrained model (must fail)", report.FRAGILE, "sanity check", "source"]
    assert list(table["figure"].unique()) == [FIG, "Fig. 5 (optimal initialisation)"]  # book order
    final = table[table.metric == "peak cosine before the jump"].iloc[0]
    assert final["cpu miniature"] == "0.5 (not reproduced)" and final["paper preset"] == "0.95 (reproduced)"
    base = table[table.metric == "peak cosine, baseline"].iloc[0]
    assert base["paper preset"] == "no run yet" and base["source"] == "mws_optimal_init"
    assert base["long CPU run"] == "–"  # that figure has no long CPU run at all


def test_a_long_cpu_run_has_its_own_column_and_the_miniature_rule(summaries):
    stages = "Hoogland Fig. 1(b) (LR stages)"
    scale_bound = next(c for c in CLAIMS if c.figure == stages and c.scale_bound)
    report.record_summary(claims_of(stages), "cpu_long", {scale_bound.metric: 1.0}, "icl_stages", {})
    row = report.reproducibility_table(CLAIMS, PAPER_PENDING).set_index("metric").loc[scale_bound.metric]
    assert row["long CPU run"] == f"{scale_bound.show(1.0)} (not comparable at this scale)"
    assert row["cpu miniature"] == "no run yet"
    assert row["paper preset"] == PAPER_PENDING[stages]   # why the paper column is empty, not "no run yet"


def test_a_recorded_status_stands_in_for_the_missing_values(summaries):
    """A page that records a status (a run in progress) is quoted in place of 'no run yet' or the pending reason;
    recording values for the same figure and preset replaces it."""
    stages = "Hoogland Fig. 1(b) (LR stages)"
    claim = next(c for c in CLAIMS if c.figure == stages)
    report.record_summary(claims_of(stages), "cpu", {claim.metric: 1.0}, "icl_stages", {})
    report.record_status(stages, "paper", "icl_stages", "in progress: step 150,000 of 500,000 (CPU)")
    table = report.reproducibility_table(CLAIMS, PAPER_PENDING).set_index("metric")
    assert set(table.loc[table["figure"] == stages, "paper preset"]) == {"in progress: step 150,000 of 500,000 (CPU)"}
    report.record_summary(claims_of(stages), "paper", {claim.metric: 5.0}, "icl_stages", {})
    assert report.reproducibility_table(CLAIMS, PAPER_PENDING).set_index("metric").loc[claim.metric, "paper preset"].startswith("5")


def test_a_finished_training_records_its_values_and_a_status_for_the_rest(summaries):
    """The stages paper run once its training is finished and its λ̂ is not: the claims the training decides show
    their values and verdicts; the λ̂ claims show the status."""
    from plateau_lib.icl import stages_page
    stages = "Hoogland Fig. 1(b) (LR stages)"
    values = stages_page.training_values(__import__("pandas").DataFrame(
        {"step": [0, 1000, 500000], "pred_sq": [0.3, 0.015, 2.2], "loss": [4.3, 4.1, 1.746],
         "delta_ridge": [2.6, 2.4, 0.0904]}))
    assert values == {"minimum mean-square prediction (LR1 marker)": 0.015, "final evaluation loss": 1.746,
                      "final Δ to ridge": 0.0904}
    report.record_summary(claims_of(stages), "paper", values, "icl_stages", {}, status="in progress: λ̂ at 3 of 39")
    table = report.reproducibility_table(CLAIMS, PAPER_PENDING).set_index("metric")
    # the loss is ridge's plus Δ: one result, counted under Δ
    assert table.loc["final evaluation loss", "paper preset"] == "1.746 (reproduced; shown, not counted)"
    assert table.loc["final Δ to ridge", "paper preset"] == "0.090 (reproduced)"
    assert table.loc["λ̂ at 40k, the paper's peak (× steps ÷ 500k)", "paper preset"] == "in progress: λ̂ at 3 of 39"


def test_empty_build_gives_an_empty_table(summaries):
    assert report.reproducibility_table(CLAIMS, PAPER_PENDING).empty


def test_mean_sd():
    assert report.mean_sd([1.0, 3.0, None]) == "2 ± 1.41 (n = 2)"
    assert report.mean_sd([None]) == "n/a (no run reached it)"


def test_git_commit_outside_a_repository(tmp_path):
    assert utils.git_commit(tmp_path) in ("unknown", "uncommitted")


def test_a_sweep_can_fill_another_presets_column_judged_by_its_own_tier(summaries):
    """The transient page's D = 8 sweep (cpu_d8_50k) fills the column of the paper's data with a smaller model,
    judged by that tier; the D = 2 long sweep beside it stays on the page only."""
    from plateau_lib.book.pages import verdicts
    transient = "Carroll Figs. 1, 3 (transient ridge)"
    share = next(c for c in claims_of(transient) if c.metric.startswith("share of the M in 16–128"))
    pc2 = next(c for c in claims_of(transient) if c.metric.startswith("|correlation of PC2"))
    table = verdicts(claims_of(transient), {"cpu_d8_50k": {share.metric: 0.5, pc2.metric: 0.88},
                                            "cpu_long": {pc2.metric: 0.1}}, "transient_ridge", {},
                     {"cpu_d8_50k": "D = 8 sweep", "cpu_long": "D = 2 sweep"},
                     record_as={"cpu_d8_50k": "paper_data", "cpu_long": None})
    assert table.loc[pc2.metric, "verdict (cpu d8 50k)"] == "reproduced" and table.loc[pc2.metric, "D = 8 sweep"] == "0.88"
    assert table.loc[pc2.metric, "verdict (cpu long)"] == "not reproduced"
    row = report.reproducibility_table(CLAIMS, PAPER_PENDING).set_index("metric")
    assert row.loc[pc2.metric, "paper's data, smaller model"] == "0.88 (reproduced)"
    assert row.loc[share.metric, "paper's data, smaller model"] == "0.50 (not comparable at this scale)"  # model-bound
    assert row.loc[pc2.metric, "long CPU run"] == "–"


def test_the_reproducibility_page_quotes_its_sources_and_lists_sanity_checks_apart(summaries):
    from plateau_lib.book import pages
    report.record_summary(claims_of(FIG), "paper", {"peak cosine before the jump": 0.95, "data ρ": 0.057}, "mws_plateau", {})
    table = report.reproducibility_table(CLAIMS, PAPER_PENDING,
                                         untrained={FIG: {"peak cosine before the jump": 0.05, "data ρ": 0.057}})
    rows = table.set_index("metric")
    assert rows.loc["peak cosine before the jump", "untrained model (must fail)"] == "0.05 (not reproduced)"
    assert rows.loc["data ρ", "untrained model (must fail)"] == "0.057 (sanity check passed)"
    assert rows.loc["step of the jump", "untrained model (must fail)"] == "no baseline run yet"
    assert rows.loc["peak cosine before the jump", "paper value from"].startswith("a summary of the paper (not its full text) (Gopalani et al. summary")
    assert rows.loc["peak cosine before the jump", "bands from"] == "the book's tolerance: a band around the paper's approximate value"
    assert rows.loc["data ρ", "bands from"] == "none: a sanity check"
    claims_html, sanity_html = pages.reproducibility(table).data, pages.reproducibility(table, sanity=True).data
    assert "peak cosine before the jump" in claims_html and "data ρ" not in claims_html
    assert "data ρ" in sanity_html and "peak cosine before the jump" not in sanity_html
    assert 'href="mws_plateau.html#provenance"' in claims_html
    # each figure heads its claims in a row of its own, not in a column of every row
    assert f'<tr class="figure-row"><th colspan="5">{FIG}</th></tr>' in claims_html and "<th>figure</th>" not in claims_html
    # what a reader comes for first, in a table narrow enough for the column; the rest in a second
    assert "paper preset" in claims_html and "bands from" not in claims_html and "untrained" not in claims_html
    sources_html = pages.reproducibility(table, part="sources").data
    assert "<summary>quote</summary>" in sources_html and "untrained model (must fail)" in sources_html
    assert "paper preset" not in sources_html
    with pytest.raises(ValueError, match="part must be one of"):
        pages.reproducibility(table, part="everything")


def test_the_band_tally_counts_each_verdict_by_where_its_band_comes_from(summaries):
    """Fig. 2's paper column, hand-set: the peak cosine and ρ rest on tolerances around "≈ 0.95" and "≈ 0.8", the
    APM's rank correlation on the book's reading of "monotonically"; the sanity check 'data ρ' is in no row, nor is
    'step of the jump', shown but not counted (its 400 steps are the configured run's length, not a paper value)."""
    from plateau_lib.book import pages
    values = {"step of the jump": 183.0, "peak ρ before the jump": 0.8, "APM's rank correlation with the step, up to the jump": 0.8,
              "peak cosine before the jump": 0.5, "data ρ": 0.057}
    report.record_summary(claims_of(FIG), "paper", values, "mws_plateau", {})
    counts = pages.band_tally(report.reproducibility_table(CLAIMS, PAPER_PENDING))
    assert counts.to_dict("index") == {
        "the paper's own spread, bound or count": {"reproduced": 0, "partly": 0, "not reproduced": 0},
        "the book's tolerance around the paper's value": {"reproduced": 1, "partly": 0, "not reproduced": 1},
        "the book's reading of a qualitative statement": {"reproduced": 0, "partly": 1, "not reproduced": 0}}


def test_verdicts_near_an_edge_of_a_reading_are_listed_nearest_first(summaries):
    """Fig. 2's one reading-based claim, the APM's rank correlation (reproduced 0.9–1, partly 0.7–1): at 0.92 it is
    2.2% from the 0.9 edge and listed; at 0.8 it is 12.5% from 0.7 and 11.1% from 0.9, not within 10%."""
    from plateau_lib.book import pages
    metric = "APM's rank correlation with the step, up to the jump"
    report.record_summary(claims_of(FIG), "paper", {metric: 0.92, "peak cosine before the jump": 0.95}, "mws_plateau", {})
    edges = report.edge_table(CLAIMS)
    assert list(edges["metric"]) == [metric] and edges["edge"].item() == 0.9
    assert edges["distance"].item() == pytest.approx(0.02 / 0.9)
    texts, near = pages.near_edges(edges)
    assert texts == {"near_total": "1", "near_count": "1", "near_within": "10%"} and list(near["edge"]) == ["0.9"]
    assert list(near["distance to it"]) == ["2.2%"]
    report.record_summary(claims_of(FIG), "paper", {metric: 0.8}, "mws_plateau", {})
    texts, near = pages.near_edges(report.edge_table(CLAIMS))
    assert near.empty and texts["near_count"] == "none"


def test_the_verdict_box_lists_the_paper_columns_verdicts_sanity_checks_last(summaries):
    from plateau_lib.book import pages
    report.record_summary(claims_of(FIG), "paper", {"data ρ": 0.057, "peak cosine before the jump": 0.95, "step of the jump": 500.0},
                          "mws_plateau", {})
    box = pages.verdict_box_html([FIG, "Figs. 41–42 (collapse at every location)"], PAPER_PENDING)
    assert "At the paper's configuration: 1 reproduced; 1 sanity check and 1 shown only, not counted." in box
    assert box.index("peak cosine before the jump") < box.index("data ρ")  # the sanity check last
    assert box.index("peak cosine before the jump") < box.index("step of the jump")  # and what is shown only
    assert "No verdict at the paper's configuration: not run yet" in box
    with pytest.raises(ValueError, match="none"):
        pages.glue_verdict_box([], PAPER_PENDING)
    # a page's own questions, which no paper asks, come below its verdicts
    import pandas as pd
    answers = pd.DataFrame({"question": ["Does a calibration meet the criteria?"], "answer": ["yes: ε = 0.0003"]})
    box = pages.verdict_box_html([FIG], PAPER_PENDING, answers=pages.answers_html(answers, "the transformer"))
    assert box.index("peak cosine before the jump") < box.index("Its own questions, answered on the transformer")
    assert pages.answers_html(None, "x") == "" and "yes: ε = 0.0003" in box
    with pytest.raises(ValueError, match="answered_on"):
        pages.glue_verdict_box([FIG], PAPER_PENDING, answers=answers)


def test_a_page_table_shows_a_missing_value_as_a_dash():
    import numpy as np
    import pandas as pd
    from plateau_lib.book import pages
    html = pages.frame_html(pd.DataFrame({"jump": [120.0, np.nan], "note": ["x", None], "mixed": [1, None],
                                          "count": pd.array([3, None], dtype="Int64")}))  # a nullable column's <NA>
    assert "NaN" not in html and "None" not in html and "<NA>" not in html
    assert html.count(f"<td>{pages.MISSING}</td>") == 4 and "<td>3</td>" in html
    assert 'class="dataframe"' in html


def test_a_page_table_writes_each_number_once_in_one_style():
    """The tier follows the rounded value (no 1000.000), infinities and minus signs are typographic in every
    column kind, and a value shown as zero carries no sign."""
    import numpy as np
    import pandas as pd
    from plateau_lib.book import pages
    assert pages.number_text(999.9996) == "1,000.0" and pages.number_text(99_999.96) == "100,000"
    assert pages.number_text(0.0099996) == "0.010" and pages.number_text(0.00123456) == "0.00123"
    assert pages.number_text(4.44e-16) == "4.44 × 10⁻¹⁶" and pages.number_text(-1.86e-5) == "−1.86 × 10⁻⁵"
    assert pages.number_text(1e-5) == "1 × 10⁻⁵" and pages.number_text(4.4e-5) == "4.4 × 10⁻⁵"
    assert pages.number_text(-0.0) == "0.000" and pages.number_text(-0.25) == "−0.250"
    assert pages.number_text(float("inf")) == "∞" and pages.number_text(-float("inf")) == "−∞"
    html = pages.frame_html(pd.DataFrame({"x": [-0.5, 0.25], "k": [-3, 4], "tenths": [-1.5, 2.0],
                                          "o": pd.Series([-np.inf, "a"], dtype=object)}))
    assert "-" not in html.replace("<tr", "").split("<tbody>")[1]
    for cell in ("−0.500", "−3", "−1.5", "−∞"):
        assert f"<td>{cell}</td>" in html
    steps = pages.frame_html(pd.DataFrame({"step": [40_292, 1000, 3]}))
    assert "<td>40,292</td>" in steps and "<td>1,000</td>" in steps and "<td>3</td>" in steps


def test_a_page_table_shows_code_names_as_code_and_headers_as_words():
    import pandas as pd
    from plateau_lib.book import pages
    frame = pd.DataFrame({"apm_before_jump": [0.5, 0.25], "t_crit": [1, 2],
                          "setting": ["training d_model", "results/plateau_llc-0251"], "note": ["a<b", pages.Verbatim("x y")]},
                         index=pd.Index(["cpu_long", "paper"], name="run_name"))
    html = pages.frame_html(frame)
    assert "<th>APM before jump</th>" in html and "<th>tᶜʳⁱᵗ</th>" in html and "<th>run name</th>" in html
    assert "<th><code>cpu_long</code></th>" in html and "<td>training <code>d_model</code></td>" in html
    assert "<td><code>results/plateau_llc-0251</code></td>" in html and "<td><code>x y</code></td>" in html
    assert "<td>a&lt;b</td>" in html and "apm_before_jump" not in html
    assert pages.formatted(pd.Series([0.12345, float("nan")]), "{:.2f}").tolist() == ["0.12", pages.MISSING]


def test_a_milestone_table_names_what_never_happened_and_indexes_its_runs():
    """A step never reached reads "none in N steps", a run never switched reads "no switch" (not a jump it missed),
    and the columns that name a run become the index (no row numbers on the page)."""
    import numpy as np
    import pandas as pd
    from plateau_lib.book import pages
    table = pd.DataFrame({"switch": ["from step 25", "never (c = 1)", "from step 50"], "seed": [0, 0, 0],
                          "steps": 600, "switched_at": [25.0, np.nan, 50.0], "jump_step": [120.0, 220.0, np.nan],
                          "steps_to_jump": [95.0, np.nan, np.nan]})
    shown = pages.readable(table, "steps", index=["switch", "seed"])
    assert shown["steps_to_jump"].tolist() == ["95", "no switch", "none in 600 steps"]
    assert shown["jump_step"].tolist() == ["120", "220", "none in 600 steps"]
    assert shown.index.names == ["switch", "seed"] and ("never (c = 1)", 0) in shown.index


def test_data_downloads_write_csv_only_in_the_book_build(tmp_path, monkeypatch):
    import pandas as pd
    from plateau_lib.book import pages
    frame = pd.DataFrame({"step": [0, 10], "loss": [2.0, 1.0]})
    for bad, match in (({}, "non-empty"), ({"Bad Name": frame}, "lower-case"), ({"ok": [1]}, "DataFrame")):
        with pytest.raises(ValueError, match=match):
            pages.data_downloads("page", bad)
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("PLATEAU_BOOK_BUILD", raising=False)
    pages.data_downloads("page", {"curves": frame})
    assert not (tmp_path / pages.DATA_FOLDER).exists()  # a live notebook writes nothing
    monkeypatch.setenv("PLATEAU_BOOK_BUILD", "1")
    pages.data_downloads("page", {"curves": frame, "empty": frame.iloc[:0]})  # an empty table is not offered
    written = tmp_path / pages.DATA_FOLDER / "page-curves.csv"
    assert pd.read_csv(written).equals(frame) and [p.name for p in written.parent.iterdir()] == ["page-curves.csv"]


def test_a_figure_without_a_paper_run_shows_its_stand_ins_column_in_the_box(summaries):
    from plateau_lib.book import pages
    figure = "Fig. 8 (Pythia/OLMo collapse and repetition)"
    report.record_summary(claims_of(figure), "trained_shape", {"peak cosine of the generated tokens' states": 0.95},
                          "llm_collapse", {}, judged_as="cpu")
    box = pages.verdict_box_html([figure], PAPER_PENDING)
    assert "No verdict at the paper's configuration: needs the real Pythia checkpoints" in box
    assert "Standing in (trained here in the paper&#x27;s model shapes): 1 reproduced." in box


def test_an_estimator_check_is_counted_in_its_own_column_not_the_papers(summaries):
    """Deep linear networks are no paper's model: their verdicts fill the estimator-check column, the box says why
    the paper column is empty, and the tally at the papers' configurations does not count them."""
    from plateau_lib.book import pages
    from plateau_lib.llc import claims as llc_claims
    claims = llc_claims.claims_of(llc_claims.DLN_FIGURE)
    values = {c.metric: ratio for c, ratio in zip(claims, (0.894, 0.954, 1.088, 1.548))}
    pages.verdicts(claims, {"estimator_check": values}, "llc_dln", {"estimator_check": {}})
    box = pages.verdict_box_html([llc_claims.DLN_FIGURE], llc_claims.PAPER_PENDING)
    assert "No verdict at the paper's configuration: no paper&#x27;s model or setting" in box
    assert "At this book&#x27;s own setting: 2 reproduced, 1 partly, 1 not reproduced." in box
    rows = report.reproducibility_table(claims, llc_claims.PAPER_PENDING)
    assert len(rows) == 4 and rows["paper preset"].str.startswith("no paper's model or setting").all()
    assert list(rows["estimator check, this book's setting"]) == [
        "0.89 (partly)", "0.95 (reproduced)", "1.09 (reproduced)", "1.55 (not reproduced)"]


def test_the_reference_values_say_when_the_reference_never_jumped():
    from types import SimpleNamespace

    import pandas as pd
    from plateau_lib.book import pages
    flat = pd.DataFrame({"step": [0, 10, 20], "acc_first": 0.1, "acc_rest": 0.05, "acc": 0.06, "cosine": 0.5,
                         "rho": 0.1, "apm": 0.1})
    assert pages.reference_values(SimpleNamespace(metrics=flat, config={"seed": 0, "steps": 20})) == {
        "reference_seed": "0", "reference_steps": "20", "reference_jump_step": pages.MISSING,
        "reference_final_acc": "0.060", "reference_solved": "no", "reference_solved_level": "0.95"}
    jumped = flat.assign(acc_first=[0.1, 0.95, 1.0], acc_rest=[0.05, 0.3, 0.99], acc=[0.06, 0.4, 0.991])
    values = pages.reference_values(SimpleNamespace(metrics=jumped, config={"seed": 3, "steps": 1200}))
    assert (values["reference_seed"], values["reference_steps"], values["reference_jump_step"]) == ("3", "1,200", "20")
    assert (values["reference_final_acc"], values["reference_solved"]) == ("0.991", "yes")


def test_a_setting_reads_as_the_settings_tables_show_it():
    from plateau_lib.book.pages import setting_text
    assert setting_text([3e-4, 1e-3, None]) == "0.0003, 0.001, default (batch ÷ ln batch)"
    assert setting_text(1024) == "1024" and setting_text(0.1 + 0.2) == "0.3" and setting_text("adam") == "adam"


def test_the_errata_are_dated_changes_with_a_reason(tmp_path):
    """The book's errata read newest first; a row without a reason, with an unchanged verdict or an undated one is
    refused, naming its line."""
    from plateau_lib.book import pages
    table = pages.errata()
    assert not table.empty and list(table.index.names) == ["date", "figure", "claim"]
    assert list(table.index.get_level_values("date")) == sorted(table.index.get_level_values("date"), reverse=True)
    bad = tmp_path / "errata.csv"
    for row in ("2026-11-28,Fig. 2,peak cosine,reproduced,reproduced,same", "2026-11-28,Fig. 2,peak cosine,a,b,",
                "28 Nov,Fig. 2,peak cosine,a,b,why"):
        bad.write_text(",".join(pages.ERRATA_COLUMNS) + "\n" + row + "\n")
        with pytest.raises(ValueError, match=r"rows \[2\]"):
            pages.errata(bad)


def test_prose_numbers_are_the_data_as_a_range_over_seeds():
    from plateau_lib.book import pages
    from plateau_lib.book.verdicts import BySeed, Claim
    claim = Claim("F", "m", "p", (0, 1), (0, 1), fmt="{:.2f}")
    assert pages.seed_range(claim, BySeed({0: 0.718, 1: 0.668, 2: 0.663})) == "0.66–0.72"
    assert pages.seed_range(claim, 1.0) == "1.00" and pages.seed_range(claim, BySeed({0: float("nan")})) == pages.MISSING
    assert pages.value_range([3.0, float("inf")], "{:.1f}") == "3.0–∞" and pages.value_range([170, 190], "{:.0f}") == "170–190"
    assert pages.value_range([40, -1200], "{:,.0f}") == "−1,200 to 40" and pages.value_range([2e-7], "{:.1g}") == "2e-07"
    from plateau_lib.book.verdicts import listed
    assert listed([984, 40292, 80807], "{:,}") == "984, 40,292 and 80,807" and listed([], empty="none") == "none"


def test_a_figure_without_a_paper_run_shows_its_long_cpu_run_as_a_miniature(summaries):
    from plateau_lib.book import pages
    figure = "Raventós Fig. 2 (task diversity)"
    claims = claims_of(figure)
    report.record_summary(claims, "cpu_long", {claims[0].metric: None}, "task_diversity", {}, judged_as="cpu")
    box = pages.verdict_box_html([figure], PAPER_PENDING)
    assert "No verdict at the paper's configuration" in box
    assert "In miniature (the long CPU run, judged as a miniature): " in box


def test_the_words_for_where_runs_were_computed_come_from_their_provenance():
    from types import SimpleNamespace

    from plateau_lib.book import pages
    run = lambda device, **meta: SimpleNamespace(meta={"device": device, **meta})  # noqa: E731
    assert pages.computed_on({0: run("cpu"), 1: run("cpu")}) == "a CPU"
    assert pages.computed_on({0: run("cpu"), 1: run("cuda:0")}) == "a GPU and a CPU"
    # a run begun on a GPU and resumed here counts both
    assert pages.computed_on({0: run("cpu", wall_time_s_by_device={"cuda": 600.0, "cpu": 900.0})}) == "a GPU and a CPU"
    assert pages.computed_on({}) == ""
    # the recorded summary names every run's device, not the first run's alone
    runs = {0: run("cuda", wall_time_s=1.0), 1: run("cpu", wall_time_s=2.0),
            2: run("cpu", wall_time_s_by_device={"cuda": 1.0, "cpu": 1.0})}
    for r in runs.values():
        r.config = {"seed": 0}
    assert pages.provenance_summary(runs)["device"] == "cpu, cuda"


def test_not_yet_shown_counts_the_claims_that_wait_by_figure():
    import pandas as pd
    from plateau_lib.book import pages
    column = pages.PRESET_COLUMNS["paper"]
    pending = {"A": "left for a GPU", "B": "needs checkpoints", "C": "in progress"}
    table = pd.DataFrame({"figure": ["A", "A", "A", "B", "C"], "sanity check": [False, False, True, False, False],
                          column: ["left for a GPU", "left for a GPU", "left for a GPU", "0.9 (reproduced)",
                                   "4 (partly)"]})
    shown = pages.not_yet_shown(table, pending, {"A": "Paper A", "B": "Paper B", "C": "Paper C"})
    assert shown.reset_index().to_dict("records") == [{"paper": "Paper A", "figure": "A", "claims waiting": 2,
                                                       "what they wait for": "left for a GPU"}]  # a sanity check is not counted


def test_a_papers_claims_count_its_verdicts_once_and_list_what_waits():
    import pandas as pd
    from plateau_lib.book import pages
    paper = pages.PRESET_COLUMNS["paper"]
    table = pd.DataFrame({"figure": ["A", "A", "A", "A", "B"], "metric": ["m1", "m2", "m3", "m4", "m5"],
                          "paper": ["1", "2", "3", "4", "5"], "sanity check": [False, False, True, False, False],
                          paper: ["1.0 (reproduced)", "0.5 (partly)", "0.1 (sanity check passed)",
                                  "1.0 (reproduced; shown, not counted)", "left for a GPU"]})
    texts, tables = pages.paper_claims(table, {"p": "P"}, {"A": "P", "B": "P"})
    assert texts == {"p_claims": "3", "p_reproduced": "1", "p_partly": "1", "p_not_reproduced": "0", "p_waiting": "1"}
    shown = tables["p"]
    assert shown.loc[("A", "m2"), ["ours", "verdict"]].tolist() == ["0.5", "partly"]
    assert shown.loc[("B", "m5"), ["ours", "verdict"]].tolist() == ["–", "left for a GPU"]
