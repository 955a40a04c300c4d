"""The notebooks only call the library: no def or class, no sys.path, a parameters cell papermill can read,
setup removed from the page, and plotting code collapsed."""
import ast
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


FIGURE_PAGES = [p for p in NOTEBOOKS if p.stem not in ("reproducibility", "performance")]


@pytest.mark.parametrize("path", FIGURE_PAGES, ids=lambda p: p.stem)
def test_every_figure_page_opens_with_the_verdict_box_its_last_cell_glues(path):
    nb = nbformat.read(path, as_version=4)
    opening = nb.cells[0].source
    assert "```{glue} verdict_box" in opening, f"{path.name}: the opening Markdown does not paste the verdict box"
    cells = code_cells(path)
    glued = [c for c in cells if "pages.glue_verdict_box(" in c.source]
    assert len(glued) == 1 and glued[0].source == cells[-1].source, f"{path.name}: glue the box once, in the last cell"
    assert "remove-cell" in glued[0].metadata.get("tags", [])
