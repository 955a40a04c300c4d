"""`make lab`'s working copy of the notebooks (``book.lab``): citations as author–year text, known answers."""
import json

import pytest

from plateau_lib.book import lab

REFS = {"a2020": ("Smith", "2020"), "b2021": ("Lee and Kim", "2021"), "c2022": ("Hoogland et al.", "2022")}


def test_citation_roles_become_author_year_text():
    assert lab.plain_citations("See {cite}`a2020`.", REFS) == "See (Smith, 2020)."
    assert lab.plain_citations("{cite:t}`c2022` showed", REFS) == "Hoogland et al. (2022) showed"
    assert lab.plain_citations("{cite:p}`a2020, b2021`", REFS) == "(Smith, 2020; Lee and Kim, 2021)"
    assert lab.plain_citations("no roles, `code` and $x$", REFS) == "no roles, `code` and $x$"
    with pytest.raises(ValueError, match=r"\['z1999'\] are not in the bibliography"):
        lab.plain_citations("{cite}`z1999`", REFS)


def test_the_bibliography_gives_surnames_with_their_particles():
    refs = lab.author_years()
    assert refs["gopalani2025plateau"] == ("Gopalani and Hu", "2025")
    assert refs["hoogland2024developmental"] == ("Hoogland et al.", "2024")
    assert refs["devinterp2024"][0] == "van Wingerden et al."


def notebook(*markdown):
    return {"cells": [{"cell_type": "markdown", "metadata": {}, "source": m} for m in markdown] +
            [{"cell_type": "code", "metadata": {}, "source": "x = '{cite}`a2020`'", "outputs": [],
              "execution_count": None}], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}


def test_the_copy_has_no_roles_nor_glue_and_keeps_edited_copies(tmp_path):
    src, dst = tmp_path / "src", tmp_path / "lab"
    src.mkdir()
    bib = tmp_path / "refs.bib"
    bib.write_text("@misc{a2020, author = {Smith, Jo}, title = {T}, year = {2020}}\n")
    (src / "one.ipynb").write_text(json.dumps(notebook("# One\n\nAs {cite}`a2020` found:\n\n```{glue} box\n```\n\nEnd.")))
    (src / "two.ipynb").write_text(json.dumps(notebook("Two")))
    assert lab.prepare(src, dst, bib) == {"written": ["one.ipynb", "two.ipynb"], "kept": []}
    one = json.loads((dst / "one.ipynb").read_text())
    assert "".join(one["cells"][0]["source"]) == "# One\n\nAs (Smith, 2020) found:\n\n\nEnd."
    assert one["cells"][1]["source"] == "x = '{cite}`a2020`'"  # code is left alone
    edited = dst / "two.ipynb"
    edited.write_text(edited.read_text().replace("Two", "My notes"))
    assert lab.prepare(src, dst, bib) == {"written": ["one.ipynb"], "kept": ["two.ipynb"]}
    assert "My notes" in edited.read_text()


def test_no_notebook_keeps_a_myst_role_in_its_lab_copy(tmp_path):
    done = lab.prepare(dst=tmp_path)
    assert len(done["written"]) == len(list(lab.NOTEBOOKS.glob("*.ipynb"))) >= 15
    for path in tmp_path.glob("*.ipynb"):
        for cell in json.loads(path.read_text())["cells"]:
            if cell["cell_type"] == "markdown":
                text = "".join(cell["source"])
                assert "{cite" not in text and "{glue}" not in text, path.name
