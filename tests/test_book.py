"""Checks on the HTML of a smoke build of the whole book (the `built_book` fixture in conftest.py)."""
import re
import shutil
import sys
from pathlib import Path

import nbformat
import pandas as pd
import pytest
from bs4 import BeautifulSoup

from conftest import REPO, run


def pages(html: Path, names):
    return {name: BeautifulSoup((html / "book" / "figures" / f"{name}.html").read_text(), "html.parser")
            for name in names}


def test_every_toc_notebook_has_a_page(built_book):
    html, names = built_book
    assert (html / "index.html").exists() and (html / "book" / "intro.html").exists()
    for name in names:
        assert (html / "book" / "figures" / f"{name}.html").exists(), name


NO_FIGURES = {"reproducibility", "performance", "summary_plateau", "summary_icl"}  # pages of tables and summaries


def test_figure_pages_show_images_that_exist(built_book):
    html, names = built_book
    for name, soup in pages(html, names).items():
        images = soup.select("main img") or soup.find_all("img")
        if name not in NO_FIGURES:
            assert images, f"{name}: no <img> on the page"
        for img in images:
            if not img["src"].startswith("data:"):
                assert (html / "book" / "figures" / img["src"]).resolve().exists(), f"{name}: missing {img['src']}"


def test_no_error_stderr_or_progress_bar(built_book):
    html, names = built_book
    for name, soup in pages(html, names).items():
        assert not soup.select("div.output.traceback"), f"{name}: a cell raised"
        stderr = soup.select("div.output.stderr")
        assert not stderr, f"{name}: stderr on the page: {stderr[0].get_text()[:500]}"
        assert "An Exception was encountered" not in soup.get_text(), f"{name}: papermill exception banner"
        state = soup.find("script", type="application/vnd.jupyter.widget-state+json")
        assert state is None or "FloatProgressModel" not in state.get_text(), f"{name}: a progress bar is embedded"
        assert not re.search(r"\d+it/s|\ds/it\]", soup.get_text()), f"{name}: progress-bar text on the page"


def test_one_provenance_dropdown_per_figure_page(built_book):
    html, names = built_book
    for name, soup in pages(html, names).items():
        blocks = soup.select("details.provenance")
        expected = 0 if name in NO_FIGURES else 1
        assert len(blocks) == expected, f"{name}: {len(blocks)} provenance blocks, expected {expected}"
        assert "Provenance:" not in soup.get_text(), f"{name}: a provenance line printed outside the dropdown"


def test_no_function_definitions_in_shown_code(built_book):
    html, names = built_book
    for name, soup in pages(html, names).items():
        for cell in soup.select("div.cell_input"):
            assert not re.search(r"^\s*(def|class) ", cell.get_text(), re.M), f"{name}: a notebook defines code"


def test_parameters_cell_is_folded_and_papermills_copy_removed(built_book):
    html, names = built_book
    for name in names:
        page = (html / "book" / "figures" / f"{name}.html").read_text()
        assert "tag_injected-parameters" not in page, name
        if "tag_parameters" in page:
            assert re.search(r'class="cell tag_parameters tag_hide-input', page), name


def test_bibliography_and_citations(built_book):
    html, names = built_book
    bib = BeautifulSoup((html / "book" / "bibliography.html").read_text(), "html.parser").get_text()
    for arxiv in ("2506.13688", "2402.02364", "2306.15063", "2501.17745", "2308.12108"):
        assert arxiv in bib, f"bibliography lacks arXiv:{arxiv}"
    for name, soup in pages(html, names).items():
        if name not in NO_FIGURES:
            cites = [a for a in soup.find_all("a", href=True) if "bibliography.html#" in a["href"]]
            assert cites, f"{name}: cites no paper"


DEVELOPER_NOTES = ["transcript", "003_", "000_", "we aimed for", "No GPU was available", "sys.path", "TODO",
                   "this checkout", "lent GPU", "our copy", "work session", "reference notes", "an earlier version",
                   "model hub", "next GPU", "not computed yet"]
# How a number or a flag reads when code printed it for its maker: numpy's repr, Python's True / False as a value,
# e-notation with a fixed mantissa (3.140e+06, 1.000e-04), a float's every digit (6.666666666666667), a list as Python
# prints it ([0, 40, 80]).
CODE_PRINTS = {"numpy repr": re.compile(r"\bnp\.(?:int|float|bool_?)\d*\("),
               "Python flag": re.compile(r"(?:=\s*|^)(?:True|False)\b"),
               "e-notation": re.compile(r"\d\.\d+e[+-]\d\d\b"),
               "every digit": re.compile(r"\d\.(?!000)\d{7,}"),  # 0.0000288 is 3 significant digits
               "Python list": re.compile(r"\[-?\d[\d.]*(?:, -?\d[\d.]*)+\]"),
               # a template's hedge instead of the number's own noun
               "plural hedge": re.compile(r"\b\w+\(s\)"),
               # the same words for every seed, listed as if they differed ("a run did not jump, a run did not jump")
               "repeated words": re.compile(r"\b([a-z][a-z ]{6,}[a-z])(?:, | and )\1\b"),
               # a number under 0.0001 as a row of zeros (0.0000444): pages.number_text writes it 4.44 × 10⁻⁵
               "row of zeros": re.compile(r"\b0\.0{4,}[1-9]")}


# Not reader text: code, maths, the hidden inputs, and quotations (verbatim, from the papers and their code).
NOT_PROSE = "div.cell_input, pre, code, script, style, span.math, div.math, .headerlink, .source-quote"
SNAKE_NAME = re.compile(r"\b[a-z][a-z0-9]*(?:_[a-z0-9]+)+\b")
MISSING_VALUE = re.compile(r"(?<![\w-])(?:NaN|nan)(?![\w-])|(?<![\w-])None(?=[,;:)\]]|\s*$)")
# Pages that may name the code: the one for re-running the book.
CODE_PAGES = ("book/rerunning.html",)


def reader_text_faults(soup: BeautifulSoup, names_allowed: bool = False) -> list[str]:
    """What a reader should not see in a page's prose and tables: a missing value printed as NaN / nan / None,
    unrendered ``$`` maths, a ``plateau_lib.`` path or a snake_case name (the preset names are reader-facing;
    ``names_allowed`` lifts both for the Re-running page), working-note phrases (in any case), and numbers or
    flags as code prints them (``CODE_PRINTS``; a table cell that is only True or False too)."""
    from plateau_lib.book.summaries import JUDGED_AS
    main = soup.find("main") or soup
    for element in main.select(NOT_PROSE):
        element.decompose()
    text = main.get_text(" ")
    cells = [cell.get_text(" ").strip() for cell in main.find_all(["td", "th"])]
    faults = sorted({m.group(0) for m in MISSING_VALUE.finditer(text)} | {c for c in cells if c == "None"})
    faults += [f"unrendered maths: …{text[max(0, m.start() - 30):m.end() + 30]}…" for m in re.finditer(r"\$", text)]
    if not names_allowed:
        faults += sorted({m.group(0) for m in SNAKE_NAME.finditer(text)} - set(JUDGED_AS))
        faults += ["plateau_lib."] * ("plateau_lib." in text)
    faults += [f"{kind}: …{text[max(0, m.start() - 30):m.end() + 10]}…" for kind, pattern in CODE_PRINTS.items()
               for m in pattern.finditer(text)]
    faults += [f"Python flag in a table: {c}" for c in sorted({c for c in cells if c in ("True", "False")})]
    return faults + [note for note in DEVELOPER_NOTES if note.lower() in text.lower()]


def test_reader_text_check_finds_each_fault():
    """Known answers: each fault in a hand-built page is found, and code, maths, quotes and presets pass."""
    page = BeautifulSoup(
        "<main><p>Loss NaN at step 3, cpu_long and <code>d_model</code> and <span class='math'>$x_1$</span>.</p>"
        "<table><tr><th>apm_before_jump</th><td>None</td></tr></table><p>costs $5 in this checkout</p>"
        "<details class='source-quote'>“y_i = x_1”</details><div class='cell_input'>x_y = None</div>"
        "<p>None of the chains; see plateau_lib.engine.</p></main>", "html.parser")
    faults = reader_text_faults(page)
    assert faults[:2] == ["NaN", "None"] and "apm_before_jump" in faults and "plateau_lib." in faults
    assert any(f.startswith("unrendered maths") for f in faults) and "this checkout" in faults
    assert not {"cpu_long", "d_model", "x_1", "y_i", "x_y"} & set(faults)
    assert reader_text_faults(BeautifulSoup("<main><p>None of the chains diverged.</p></main>", "html.parser")) == []
    prints = reader_text_faults(BeautifulSoup(
        "<main><p>seeds [np.int64(0)], softmax = True, 3.140e+06 s, γ 6.666666666666667, steps [0, 40, 80], Our copy says</p>"
        "<table><tr><td>False</td></tr></table></main>", "html.parser"))
    assert [f.split(":")[0] for f in prints] == ["numpy repr", "Python flag", "e-notation", "every digit",
                                                "Python list", "Python flag in a table", "our copy"]
    templates = reader_text_faults(BeautifulSoup(
        "<main><p>next to step(s) 80, a run did not jump, a run did not jump and a run did not jump; 0.000000000000000444"
        "</p></main>", "html.parser"))
    assert [f.split(":")[0] for f in templates] == ["plural hedge", "repeated words", "row of zeros"]
    assert reader_text_faults(BeautifulSoup("<main><p>steps 80 and 90; a run did not jump (seeds 1 and 2); 4.44 × 10⁻¹⁶, "
                                            "0.000123, 0.0000 at four decimals</p></main>", "html.parser")) == []
    two = reader_text_faults(BeautifulSoup("<main><p>not reached and not reached (seeds 0 and 1)</p></main>", "html.parser"))
    assert [f.split(":")[0] for f in two] == ["repeated words"]
    assert reader_text_faults(BeautifulSoup("<main><p>ε = 4e-4, 0.25, 2.88 × 10⁻⁵ and yes; True to the paper.</p></main>",
                                            "html.parser")) == []


def test_reader_text_is_for_readers(built_book):
    html, _ = built_book
    for page in sorted(html.rglob("*.html")):
        relative = page.relative_to(html)
        if relative.parts[0] in ("_static", "_sources"):
            continue
        faults = reader_text_faults(BeautifulSoup(page.read_text(), "html.parser"),
                                    names_allowed=relative.as_posix() in CODE_PAGES)
        assert not faults, f"{relative}: not reader text: {faults}"


def test_figure_pages_offer_their_data_as_csv(built_book):
    """Every figure page links the data behind its figures as CSV downloads, and each file parses."""
    html, names = built_book
    for name, soup in pages(html, names).items():
        links = [a["href"] for a in soup.select("a.download") if a["href"].endswith(".csv")]
        assert links, f"{name}: no CSV download"
        for href in links:
            frame = pd.read_csv((html / "book" / "figures" / href).resolve())
            assert len(frame.columns) > 1 and len(frame) > 0, f"{name}: {href} is empty"


def test_no_external_scripts_or_stylesheets(built_book):
    html, _ = built_book
    for page in html.rglob("*.html"):
        if page.relative_to(html).parts[0] == "_static":  # theme templates, not pages
            continue
        soup = BeautifulSoup(page.read_text(), "html.parser")
        urls = [tag["src"] for tag in soup.find_all("script", src=True)]
        urls += [tag["href"] for tag in soup.find_all("link", href=True)]
        external = [u for u in urls if u.startswith(("http:", "https:", "//"))]
        assert not external, f"{page.relative_to(html)} loads {external}"
        for url in urls:
            if not url.startswith("#"):
                local = (page.parent / url.split("?")[0].split("#")[0]).resolve()
                assert local.exists(), f"{page.relative_to(html)}: {url} does not exist"


def test_math_uses_the_vendored_mathjax(built_book):
    html, _ = built_book
    soup = BeautifulSoup((html / "book" / "intro.html").read_text(), "html.parser")
    assert any(s["src"].startswith("../_static/mathjax/tex-mml-chtml.js") for s in soup.find_all("script", src=True))
    assert (html / "_static" / "mathjax" / "output" / "chtml" / "fonts" / "woff-v2").is_dir()


def test_widget_pages_embed_their_state(built_book):
    html, names = built_book
    widget_pages = {name: soup for name, soup in pages(html, names).items()
                    if soup.find("script", type="application/vnd.jupyter.widget-view+json")}
    if not widget_pages:
        pytest.skip("no page with widgets in this build")
    for name, soup in widget_pages.items():
        assert soup.find("script", type="application/vnd.jupyter.widget-state+json"), name
        sources = [s["src"] for s in soup.find_all("script", src=True)]
        assert any("_static/html-manager/embed-amd.js" in s for s in sources), name
        assert any("_static/require.js" in s for s in sources), name


@pytest.fixture
def runner_copy(tmp_path):
    """A repository copy with only the runner and one notebook that raises, plus a stale built book."""
    shutil.copytree(REPO / "scripts", tmp_path / "scripts")
    (tmp_path / "notebooks").mkdir()
    notebook = nbformat.v4.new_notebook()
    notebook.cells = [nbformat.v4.new_code_cell('preset = "cpu"', metadata={"tags": ["parameters"]}),
                      nbformat.v4.new_code_cell("raise ValueError('deliberate failure')")]
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(notebook, tmp_path / "notebooks" / "broken.ipynb")
    (tmp_path / "book" / "_build" / "html").mkdir(parents=True)
    (tmp_path / "book" / "_build" / "html" / "index.html").write_text("stale")
    return tmp_path


def test_bad_preset_is_refused(runner_copy):
    result = run([sys.executable, "scripts/run_notebooks.py"], runner_copy, PRESET="gpu")
    assert result.returncode != 0
    assert "PRESET must be one of cpu, paper" in result.stderr and "'gpu'" in result.stderr


def test_failing_notebook_fails_the_run_and_removes_the_book(runner_copy):
    result = run([sys.executable, "scripts/run_notebooks.py"], runner_copy, PRESET="cpu")
    assert result.returncode != 0
    assert "FAILED: notebooks/broken.ipynb" in result.stderr
    assert "deliberate failure" in result.stderr
    assert not (runner_copy / "book" / "_build" / "html").exists()
    assert not (runner_copy / "book" / "figures" / "broken.ipynb").exists()


def test_every_figure_page_opens_with_its_verdict_box(built_book):
    """The box (pages.glue_verdict_box, pasted by the opening Markdown) comes before the page's first section, with
    its verdicts or the sentence saying why it has none."""
    html, names = built_book
    for name, soup in pages(html, names).items():
        if name in NO_FIGURES:
            continue
        box = soup.select_one("div.verdict-box")
        assert box is not None, f"{name}: no verdict box"
        first_section = soup.select_one("main section section") or soup.select_one("main h2")
        assert first_section is None or box.sourceline < first_section.sourceline, f"{name}: the verdict box is not first"
        text = box.get_text(" ")
        assert re.search(r"At the paper's configuration: \d|No verdict|No verdicts on this page", text), \
            f"{name}: the box has neither verdicts nor a reason: {text[:300]}"


def test_the_paper_column_holds_only_the_papers_configurations(built_book):
    """Every run behind a recorded ``paper`` column (its summary's provenance) has the configuration of one of the
    chapters' paper-preset runs (``chapters.page_runs("paper")``, device aside): no miniature, no model trained in
    place of the paper's. The LLC golden models train nothing."""
    import json
    from plateau_lib import chapters
    from plateau_lib.engine.runs import TrainConfig
    html, _ = built_book
    allowed = {json.dumps(cfg.key_dict(), sort_keys=True, default=str)
               for runs in chapters.page_runs("paper").values() for cfg in runs.values()
               if isinstance(cfg, TrainConfig)}
    summaries = [json.loads(p.read_text()) for p in (html.parent.parent / "figures" / "_summaries").glob("*.json")]
    paper = [s for s in summaries if s["preset"] == "paper" and s["rows"]]
    assert paper, "the smoke build recorded no paper column"
    for s in paper:
        configs = s["provenance"].get("configs")
        if configs is None:
            assert s["figure"] == "LLC golden models", \
                f"{s['figure']}: its paper column names no run configs"
            continue
        for config in configs:
            key = json.dumps(TrainConfig(**{**config, "device": "cpu"}).key_dict(), sort_keys=True, default=str)
            assert key in allowed, f"{s['figure']}: a run in the paper column is not a paper-preset run: {config}"
