"""The notebooks as ``make lab`` serves them. JupyterLab renders Markdown but not MyST's roles and directives, so
``prepare`` makes a working copy of ``notebooks/`` in ``.cache/lab/`` in which each citation role is plain
author–year text from the book's bibliography (``{cite}`k``` → "(Gopalani and Hu, 2025)", ``{cite:t}`k``` →
"Gopalani and Hu (2025)") and each ``{glue}`` block is dropped (the built page's copy of an output that JupyterLab
shows where its cell runs). A copy edited in JupyterLab is kept as it is, not overwritten.
"""
from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

from pybtex.database import parse_file  # the book's bibliography reader (sphinxcontrib-bibtex's)

from plateau_lib.engine.utils import atomic_path

REPO = Path(__file__).resolve().parents[2]
NOTEBOOKS = REPO / "notebooks"
BIBLIOGRAPHY = REPO / "book" / "references.bib"
LAB = REPO / ".cache" / "lab"
MADE = ".made.json"  # {notebook: sha256 of the copy as written}: a copy whose hash differs was edited in JupyterLab

CITE = re.compile(r"\{cite(?::(?P<kind>[a-z]+))?\}`(?P<keys>[^`]+)`")
GLUE = re.compile(r"^```\{glue\}[^\n]*\n(?:[^\n]*\n)*?```[ \t]*\n?", re.M)


def author_years(bib: Path = BIBLIOGRAPHY) -> dict[str, tuple[str, str]]:
    """``{key: (authors, year)}`` of the bibliography: "Last", "Last and Last" or "Last et al."."""
    out = {}
    for key, entry in parse_file(str(bib)).entries.items():
        persons = entry.persons.get("author", [])
        lasts = [" ".join(p.prelast_names + p.last_names) for p in persons] or [entry.fields.get("title", key)]
        authors = lasts[0] if len(lasts) == 1 else " and ".join(lasts) if len(lasts) == 2 else f"{lasts[0]} et al."
        out[key] = (authors.replace("{", "").replace("}", ""), entry.fields.get("year", "n.d."))
    return out


def plain_citations(text: str, refs: dict[str, tuple[str, str]]) -> str:
    """``text`` with its MyST citation roles as author–year text: ``{cite:t}`` as "A (Y)", every other kind as
    "(A, Y)"; several keys are joined by "; ". A key not in ``refs`` is an error naming it."""
    def cite(m: re.Match) -> str:
        keys = [k.strip() for k in m["keys"].split(",")]
        missing = [k for k in keys if k not in refs]
        if missing:
            raise ValueError(f"citation key(s) {missing} are not in the bibliography; known: {sorted(refs)}")
        if m["kind"] == "t":
            return "; ".join(f"{refs[k][0]} ({refs[k][1]})" for k in keys)
        return "(" + "; ".join(f"{refs[k][0]}, {refs[k][1]}" for k in keys) + ")"
    return CITE.sub(cite, text)


def lab_notebook(notebook: dict, refs: dict[str, tuple[str, str]]) -> dict:
    """The notebook with its Markdown cells as JupyterLab shows them best (citations as text, no glue blocks)."""
    cells = []
    for cell in notebook["cells"]:
        if cell["cell_type"] == "markdown":
            source = plain_citations(GLUE.sub("", "".join(cell["source"])), refs)
            cell = {**cell, "source": source.splitlines(keepends=True)}
        cells.append(cell)
    return {**notebook, "cells": cells}


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def prepare(src: Path = NOTEBOOKS, dst: Path = LAB, bib: Path = BIBLIOGRAPHY) -> dict[str, list[str]]:
    """Write JupyterLab's copy of every notebook of ``src`` into ``dst``, except copies edited there since they
    were written (kept). Returns ``{"written": [...], "kept": [...]}`` (notebook names)."""
    refs, dst = author_years(bib), Path(dst)
    dst.mkdir(parents=True, exist_ok=True)
    made_path = dst / MADE
    made = json.loads(made_path.read_text()) if made_path.exists() else {}
    done = {"written": [], "kept": []}
    for path in sorted(Path(src).glob("*.ipynb")):
        target = dst / path.name
        if target.exists() and made.get(path.name) != _digest(target.read_text()):
            done["kept"].append(path.name)
            continue
        text = json.dumps(lab_notebook(json.loads(path.read_text()), refs), indent=1, ensure_ascii=False) + "\n"
        with atomic_path(target) as tmp:
            Path(tmp).write_text(text)
        made[path.name] = _digest(text)
        done["written"].append(path.name)
    with atomic_path(made_path) as tmp:
        Path(tmp).write_text(json.dumps(made, indent=1))
    return done


def main() -> None:
    """``make lab``'s preparation: the copy, and a line on copies kept because they were edited."""
    done = prepare()
    if done["kept"]:
        print(f"Kept your edited copies in {LAB}: {', '.join(done['kept'])} (delete one to get the book's again)")
