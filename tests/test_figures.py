"""Every figure of the book is numbered and captioned (issue 53): each code cell of a book notebook that draws a
figure carries MyST-NB's cell metadata ``mystnb.figure`` with a caption and a name, and the names are unique.

A cell draws a figure when it assigns ``fig = ...`` (indented too, under an ``if``) or calls a page helper that
draws a stored run's figure (``show_stored``, ``show_stored_run``). A cell that shows an
``image_selector`` (a slider or dropdown of images) is not one figure and carries no caption.

MyST-NB wraps *every* display output of a cell with figure metadata in its own figure, with the same caption and
the same name (a duplicate target, which fails the ``-W`` build). So a cell that also ``display``s a table or a
sentence next to its figure (in the same block of statements) cannot be captioned through its metadata: it is
listed in MIXED, carries no caption, and is captioned once its figure has a cell of its own. For the same
reason a cell whose run is not committed yet shows a note where its figure will be; NOT_YET lists those. Static: reads the
notebooks' JSON, runs nothing."""
import ast
import json
import re
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = ROOT / "notebooks"
# (notebook, cell id): figure cells that also display other outputs beside the figure; captioned once the figure
# is split into a cell of its own (issue 53)
MIXED: set = set()
# (notebook, cell id): figure cells whose figure the built book does not have yet (its run is not committed), so
# the cell shows a note instead, which a caption would number and label as the figure (issue 53)
NOT_YET: set = set()

DRAWS = re.compile(r"^\s*fig\s*=|\b(?:show_stored|show_stored_run)\(", re.M)
NAME = re.compile(r"^fig-[a-z0-9]+(?:-[a-z0-9]+)*$")


def toc_notebooks() -> list[str]:
    """The notebooks of _toc.yml's figure chapters (book/figures/NAME -> NAME), in book order."""
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    files = []

    def walk(entries):
        for entry in entries or []:
            if "file" in entry:
                files.append(entry["file"])
            walk(entry.get("sections"))

    for part in toc.get("parts") or [toc]:
        walk(part.get("chapters"))
    return [f.split("/")[-1] for f in files if f.startswith("book/figures/")]


def figure_cells(name: str) -> list[dict]:
    cells = json.loads((NOTEBOOKS / f"{name}.ipynb").read_text(encoding="utf-8"))["cells"]
    return [c for c in cells if c["cell_type"] == "code" and DRAWS.search("".join(c["source"]))
            and "image_selector(" not in "".join(c["source"])]


def _draws(node) -> bool:
    return (isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "fig" for t in node.targets)) or (
        isinstance(node, ast.Expr) and isinstance(node.value, ast.Call) and DRAWS.search(ast.unparse(node.value)))


def _displays(node) -> bool:
    return isinstance(node, ast.Expr) and isinstance(node.value, ast.Call) and ast.unparse(node.value.func) == "display"


def shows_more_than_the_figure(cell: dict) -> bool:
    """True when one block of the cell's statements both draws the figure and displays something else."""
    tree = ast.parse("".join(cell["source"]))
    blocks = [tree.body] + [getattr(n, f) for n in ast.walk(tree) for f in ("body", "orelse")
                            if isinstance(getattr(n, f, None), list) and n is not tree]
    return any(any(_draws(s) for s in b) and any(_displays(s) for s in b) for b in blocks)


def figure_options(cell: dict) -> dict:
    return (cell.get("metadata", {}).get("mystnb") or {}).get("figure") or {}


BOOK = toc_notebooks()
CHECKED = BOOK


def test_toc_lists_the_notebooks():
    assert CHECKED, "no figure chapters found in _toc.yml"
    missing = [n for n in BOOK if not (NOTEBOOKS / f"{n}.ipynb").exists()]
    assert not missing, f"_toc.yml lists chapters with no notebook: {missing}"


@pytest.mark.parametrize("name", CHECKED)
def test_every_figure_cell_is_captioned_and_named(name):
    cells = figure_cells(name)
    problems = []
    for cell in cells:
        where = f"{name}.ipynb cell {cell.get('id')}"
        options = figure_options(cell)
        if (name, cell.get("id")) in NOT_YET:
            if options:
                problems.append(f"{where}: in NOT_YET but captioned: drop it from NOT_YET once its run is committed")
            continue
        mixed = shows_more_than_the_figure(cell)
        if (name, cell.get("id")) in MIXED or mixed:
            if not mixed:
                problems.append(f"{where}: listed in MIXED but shows only its figure now: caption it, drop it from MIXED")
            elif (name, cell.get("id")) not in MIXED:
                problems.append(f"{where}: displays other outputs beside its figure; give the figure a cell of its own")
            elif options:
                problems.append(f"{where}: a caption here would be repeated under each of its outputs")
            continue
        caption = str(options.get("caption", "")).strip()
        label = str(options.get("name", ""))
        if not caption:
            problems.append(f"{where}: no mystnb.figure.caption")
        elif "\n" in caption or "{glue" in caption:
            problems.append(f"{where}: the caption must be one line of plain MyST, without glue roles")
        if not NAME.match(label):
            problems.append(f"{where}: mystnb.figure.name {label!r} is not fig-<page>-<short-name> (lower case, hyphens)")
        elif not label.startswith(f"fig-{name.replace('_', '-')}-"):
            problems.append(f"{where}: mystnb.figure.name {label!r} does not start with the page's fig-{name.replace('_', '-')}-")
    assert not problems, "\n".join(problems)


def test_figure_names_are_unique_across_the_book():
    seen: dict[str, str] = {}
    duplicates = []
    for name in BOOK:
        for cell in json.loads((NOTEBOOKS / f"{name}.ipynb").read_text(encoding="utf-8"))["cells"]:
            label = figure_options(cell).get("name")
            if label is None:
                continue
            where = f"{name}.ipynb cell {cell.get('id')}"
            if label in seen:
                duplicates.append(f"{label}: {seen[label]} and {where}")
            seen[label] = where
    assert not duplicates, "duplicate figure names:\n" + "\n".join(duplicates)


def test_image_selectors_carry_no_caption():
    """A slider or dropdown of images is not one figure: a caption there would label every image alike."""
    wrong = [f"{name}.ipynb cell {c.get('id')}" for name in CHECKED
             for c in json.loads((NOTEBOOKS / f"{name}.ipynb").read_text(encoding="utf-8"))["cells"]
             if c["cell_type"] == "code" and "image_selector(" in "".join(c["source"]) and figure_options(c)]
    assert not wrong, f"image selectors with a figure caption: {wrong}"
