"""The notebooks only call the library: no def or class, no sys.path, a parameters cell papermill can read,
setup removed from the page, and plotting code collapsed."""
import ast
import re
from pathlib import Path

import nbformat
import papermill as pm
import pytest

NOTEBOOKS = sorted((Path(__file__).resolve().parent.parent / "notebooks").glob("*.ipynb"))


def code_cells(path):
    return [c for c in nbformat.read(path, as_version=4).cells if c.cell_type == "code"]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_no_def_class_or_sys_path(path):
    for cell in code_cells(path):
        tree = ast.parse(cell.source)
        defined = [n.name for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))]
        assert not defined, f"{path.name} defines {defined}: move it into plateau_lib"
        assert not any(isinstance(n, ast.Lambda) for n in ast.walk(tree)), f"{path.name} defines a lambda"
        assert "sys.path" not in cell.source, f"{path.name} edits sys.path"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_parameters_cell_is_read_whole_by_papermill(path):
    cells = [c for c in code_cells(path) if "parameters" in c.metadata.get("tags", [])]
    assert len(cells) == 1, f"{path.name}: needs exactly one cell tagged 'parameters'"
    assigned = {t.id for n in ast.parse(cells[0].source).body if isinstance(n, ast.Assign) for t in n.targets}
    assert {"preset", "use_cache"} <= assigned, f"{path.name}: every page takes preset and use_cache"
    # papermill drops a parameter whose comment it cannot parse; the strict runner would then refuse it
    assert set(pm.inspect_notebook(str(path))) == assigned


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_setup_is_one_short_removed_cell(path):
    cells = code_cells(path)
    setup = [c for c in cells if "pages.setup()" in c.source]
    assert len(setup) == 1, f"{path.name}: call pages.setup() once"
    assert "remove-cell" in setup[0].metadata.get("tags", []), f"{path.name}: the setup cell is plumbing"
    assert len(setup[0].source.splitlines()) <= 12, f"{path.name}: the setup cell should be a few lines"
    for cell in cells:
        tags = cell.metadata.get("tags", [])
        if "plots." in cell.source and "parameters" not in tags:
            assert {"hide-input", "remove-input", "remove-cell"} & set(tags), \
                f"{path.name}: plotting code should be collapsed:\n{cell.source[:200]}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_every_cell_has_a_unique_id(path):
    """nbformat 4.5 cells carry ids (a cell added by hand without one warns in every build, and will be an error)."""
    import json
    cells = json.loads(path.read_text())["cells"]
    ids = [c.get("id") for c in cells]
    assert None not in ids, f"{path.name}: cell(s) {[i for i, c in enumerate(ids) if c is None]} have no id"
    assert len(set(ids)) == len(ids), f"{path.name}: repeated cell ids"


FIGURE_PAGES = [p for p in NOTEBOOKS if p.stem not in ("reproducibility", "performance", "summary_plateau", "summary_icl")]


@pytest.mark.parametrize("path", FIGURE_PAGES, ids=lambda p: p.stem)
def test_every_figure_page_opens_with_the_verdict_box_its_last_cell_glues(path):
    nb = nbformat.read(path, as_version=4)
    opening = nb.cells[0].source
    assert "```{glue} verdict_box" in opening, f"{path.name}: the opening Markdown does not paste the verdict box"
    cells = code_cells(path)
    glued = [c for c in cells if "pages.glue_verdict_box(" in c.source]
    assert len(glued) == 1 and glued[0].source == cells[-1].source, f"{path.name}: glue the box once, in the last cell"
    assert "remove-cell" in glued[0].metadata.get("tags", [])


DECIMAL = re.compile(r"(?<![\w.])\d+\.\d+(?![\w.])")


def paper_numbers() -> set[str]:
    """Every decimal the papers give, as the claims state them: their paper values, quotes and bands."""
    from plateau_lib import chapters
    texts = [t for c in chapters.claims() for t in (c.paper, c.source.quote if c.source else "", str(c.band or ""))]
    return {n for t in texts for n in DECIMAL.findall(t)}


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_a_measured_number_in_the_prose_is_glued_from_the_data(path):
    """A decimal in a page's prose (outside maths and code) is a paper's number; ours enter as glued values, so the
    words cannot say 0.99–1.0 where the table says 0.88."""
    allowed = paper_numbers()
    typed = [n for cell in nbformat.read(path, as_version=4).cells if cell.cell_type == "markdown"
             for n in DECIMAL.findall(re.sub(r"\$[^$]*\$|`[^`]*`", "", cell.source)) if n not in allowed]
    assert not typed, f"{path.name} types measured numbers {typed}: glue them ({{glue:md}}`name`)"


COUNT = re.compile(r"(?<![\w.,])\d[\d,]* of (?:the )?\d[\d,]*(?![\w.])")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_a_count_in_the_prose_is_glued_from_the_data(path):
    """"43 of 51 runs" in a page's prose (outside maths and code) is a count of this book's results: it enters as
    glued values, so it follows the runs when they change."""
    typed = [m for cell in nbformat.read(path, as_version=4).cells if cell.cell_type == "markdown"
             for m in COUNT.findall(re.sub(r"\$[^$]*\$|`[^`]*`", "", cell.source))]
    assert not typed, f"{path.name} types counts {typed}: glue them ({{glue:md}}`name`)"


def test_the_typed_number_check_fails_on_a_typed_measurement():
    assert COUNT.findall("43 of 51 runs, {glue:md}`n` of the {glue:md}`m` fits, 1,024 of the 2,048") == ["43 of 51", "1,024 of the 2,048"]
    assert DECIMAL.findall("a rank correlation of 0.99–1.0 at both scales, $x = 0.5$") == ["0.99", "1.0", "0.5"]
    assert "0.876" not in paper_numbers() and "0.95" in paper_numbers()


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_every_code_cell_says_how_the_page_shows_it(path):
    """A page shows its outputs, not its code: every code cell but the parameters is tagged to hide or remove its
    input (or itself)."""
    shown = {"parameters", "hide-input", "remove-input", "remove-cell", "hide-cell"}
    bare = [c.source[:60] for c in code_cells(path) if not shown & set(c.metadata.get("tags", []))]
    assert not bare, f"{path.name}: code cells with no hide/remove tag: {bare}"
