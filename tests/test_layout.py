"""The package layout: one package per chapter over ``engine``, ``llc`` and ``book``; imports point one way, nothing
runs in a circle, the registry finds every chapter's presets, claims and page runs, and committed results keep
their keys."""
import ast
import json
from pathlib import Path

import pandas as pd
import pytest

from plateau_lib import chapters, paper_queue
from plateau_lib.engine import cache
from plateau_lib.engine.runs import TrainConfig
from plateau_lib.icl import development

PACKAGE = Path(__file__).resolve().parent.parent / "plateau_lib"
CHAPTER_PACKAGES = ("plateau", "icl", "llm")  # the chapters' domain code (llc holds the estimator and its own page)
LOWER = {"engine": {"engine"}, "book": {"engine", "book"}, "llc": {"engine", "book", "llc"}}


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules() -> dict[str, Path]:
    return {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def imports(path: Path, known: set[str]) -> set[str]:
    """The plateau_lib modules ``path`` imports anywhere in it (module level or inside functions): ``from a.b import c``
    is an edge to ``a.b.c`` when that is a module, else to ``a.b``."""
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    tree = ast.parse(path.read_text())
    tree.body = [n for n in tree.body if not is_main_guard(n)]  # the program's entry, not the module's dependency
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package.split(".")[:len(package.split(".")) - node.level + 1] + ([base] if base else []))
            for alias in node.names:
                target = f"{base}.{alias.name}"
                found.add(target if target in known else base)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
    return {m for m in found if m in known and m != name}


def is_main_guard(node) -> bool:
    """``if __name__ == "__main__":`` at module level (run only when the module is the program)."""
    test = getattr(node, "test", None)
    return (isinstance(node, ast.If) and isinstance(test, ast.Compare) and isinstance(test.left, ast.Name)
            and test.left.id == "__name__" and any(isinstance(c, ast.Constant) and c.value == "__main__"
                                                   for c in test.comparators))


def graph() -> dict[str, set[str]]:
    mods = modules()
    return {m: imports(p, set(mods)) for m, p in mods.items()}


def part(module: str) -> str:
    return module.split(".")[1] if module.count(".") >= 1 else module


def test_the_import_walk_sees_relative_absolute_and_function_level_imports(tmp_path):
    known = {"plateau_lib.engine.cache", "plateau_lib.engine", "plateau_lib.book.plots", "plateau_lib.icl.data"}
    src = PACKAGE / "icl" / "_walk_probe.py"
    try:
        src.write_text("from ..engine import cache\nfrom plateau_lib.book.plots import x\n"
                       "def f():\n    from . import data\n"
                       "if __name__ == '__main__':\n    from plateau_lib.engine import x\n")
        assert imports(src, known) == {"plateau_lib.engine.cache", "plateau_lib.book.plots", "plateau_lib.icl.data"}
    finally:
        src.unlink()


def test_only_the_commands_module_reads_a_command_line():
    """Library modules hold plain functions; ``plateau_lib.commands`` is the one place that parses options
    (``python -m plateau_lib COMMAND``), and ``python -m plateau_lib.paper`` is handed to it."""
    readers = sorted(m for m, p in modules().items() if any(
        isinstance(n, (ast.Import, ast.ImportFrom)) and "argparse" in {getattr(n, "module", None), *(a.name for a in n.names)}
        for n in ast.walk(ast.parse(p.read_text()))))
    assert readers == ["plateau_lib.commands"]


def test_no_import_cycle():
    edges = graph()
    state, stack = {}, []

    def visit(m):
        state[m] = "open"
        stack.append(m)
        for n in sorted(edges[m]):
            if state.get(n) == "open":
                raise AssertionError("import cycle: " + " -> ".join(stack[stack.index(n):] + [n]))
            if n not in state:
                visit(n)
        stack.pop()
        state[m] = "done"

    for m in sorted(edges):
        if m not in state:
            visit(m)


def test_engine_book_and_llc_import_no_chapter():
    for module, targets in graph().items():
        allowed = LOWER.get(part(module))
        if allowed is None:
            continue
        wrong = sorted(t for t in targets if part(t) not in allowed)
        assert not wrong, f"{module} imports {wrong}; {part(module)} may import only {sorted(allowed)}"


def test_chapters_import_no_other_chapter_except_the_shared_metrics():
    for module, targets in graph().items():
        if part(module) not in CHAPTER_PACKAGES:
            continue
        others = sorted(t for t in targets if part(t) in CHAPTER_PACKAGES and part(t) != part(module))
        # the Pythia/OLMo pages measure repetition with the MWS pages' ρ (one metrics module)
        assert others in ([], ["plateau_lib.plateau.metrics"]), f"{module} imports {others}"


def test_the_task_tables_targets_are_chapter_task_modules_that_do_not_import_the_loop_back():
    """engine.tasks names each task's class as a string (the loop reaches a chapter's task only through it): every
    target is a chapter's module with that class, and that module imports only engine, llc and book, never the
    registry or the queue above the chapters."""
    from plateau_lib.engine import tasks
    mods, edges = modules(), graph()
    for name, target in tasks.TASKS.items():
        module, attr = target.split(":")
        assert module in mods and part(module) in CHAPTER_PACKAGES, f"{name}: {module} is not a chapter's module"
        assert callable(tasks.task_class(name)), f"{name}: {target} is not a class or factory"
        above = sorted(t for t in edges[module] if part(t) in ("chapters", "paper_queue", "paper", "commands"))
        assert not above, f"{module} (task {name}) imports {above}"


def test_no_chapter_imports_the_registry_or_the_queue():
    """``chapters`` (the registry) and ``paper_queue`` (the queue) sit above every chapter; ``commands`` above them,
    and ``paper`` (``python -m plateau_lib.paper``) above that."""
    for module, targets in graph().items():
        if part(module) in (*CHAPTER_PACKAGES, "engine", "llc", "book"):
            above = sorted(t for t in targets if t in ("plateau_lib.chapters", "plateau_lib.paper_queue",
                                                       "plateau_lib.paper", "plateau_lib.commands"))
            assert not above, f"{module} imports {above}"


def test_registry_finds_every_chapters_presets_claims_page_runs_and_analyses():
    toc = (PACKAGE.parent / "_toc.yml").read_text()
    for chapter in chapters.CHAPTERS:
        assert (PACKAGE / chapter / "presets.py").exists() and (PACKAGE / chapter / "claims.py").exists(), chapter
    claims = chapters.claims()
    figures = {c.figure for c in claims}
    assert len(claims) == len({(c.figure, c.metric) for c in claims})
    assert set(chapters.paper_pending()) <= figures
    for preset in ("paper", "cpu"):
        runs = chapters.page_runs(preset)
        assert runs and all(f"book/figures/{page}" in toc for page in runs), sorted(runs)
        assert all(isinstance(c, TrainConfig) for page in runs.values() for c in page.values())
    for preset in ("paper", "cpu"):
        steps = chapters.analyses(preset)
        names = [name for a in steps for name in a.outputs]
        assert {a.page for a in steps} == {"icl_stages", "transient_ridge", "plateau_llc", "mws_probe_and_locations",
                                           "llm_collapse"}
        assert len(names) == len(set(names)) and all(f"book/figures/{a.page}" in toc for a in steps)
    with pytest.raises(ValueError, match="unknown chapter"):
        chapters._module("nope", "presets")


def test_committed_results_keep_their_keys():
    """Every committed folder's key is recomputed from its own meta (the config or the spec it records), and every
    run ``results/runs.csv`` indexes is still declared by the chapters' presets under the same folder name."""
    checked = 0
    for meta_path in sorted(cache.current().committed.glob("*-*/meta.json")):
        kind, key = meta_path.parent.name.rsplit("-", 1)
        meta = json.loads(meta_path.read_text())
        if "config" in meta:
            meta["config"] = {**meta["config"], "device": "cpu"}  # provenance (a GPU's runs say cuda), not in the key
        if kind == "train":
            assert cache.cache_key(TrainConfig(**meta["config"]), meta.get("extra")) == key, meta_path.parent.name
        elif kind == development.KIND:
            assert development.stored(TrainConfig(**meta["config"]), meta["llc"]).key == key, meta_path.parent.name
        else:
            assert cache.table_key(meta["spec"]) == key, meta_path.parent.name
        checked += 1
    assert checked > 100
    index = pd.read_csv(cache.current().committed / "runs.csv")
    declared = {f"train-{cache.cache_key(e.config, e.extra)}" for preset in ("paper", "cpu")
                for e in paper_queue.status(None, preset)}
    assert set(index["folder"]) <= declared


# Where a long string in the library is not a page's prose: the claims' paper quotes and sources (data), the command
# line's help and errors, and the estimator's warnings to whoever runs it.
NOT_PROSE = {"claims.py": "the claims' quotes and sources", "commands.py": "the command line's help and errors",
             "result.py": "the estimator's warnings"}
PROSE_LIMIT = 150  # characters: a label or a table cell is shorter; a page's sentences are not


def long_strings(source: str) -> list[tuple[int, str]]:
    """(line, text) of every string literal or f-string longer than ``PROSE_LIMIT`` in ``source`` that is not a
    docstring, an HTML template (it holds a closing tag) or inside a raise, a warning, a print or an argparse call."""
    tree, skipped = ast.parse(source), set()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
            skipped.add(id(body[0].value))
        called = isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", ""))
        if isinstance(node, ast.Raise) or called in ("warn", "print", "add_argument", "error"):
            skipped |= {id(inner) for inner in ast.walk(node)}
    found = []
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            text = node.value
        elif isinstance(node, ast.JoinedStr):
            text = "".join(v.value if isinstance(v, ast.Constant) else "{}" for v in node.values)
        else:
            continue
        if len(text) > PROSE_LIMIT and "</" not in text:
            found.append((node.lineno, text))
    return found


def test_no_library_function_writes_a_pages_prose():
    """A page's sentences live in its notebook's Markdown; the library returns numbers, tables and labels. A string
    in plateau_lib longer than a label, outside docstrings, errors, warnings and the places NOT_PROSE names, fails;
    the checker itself finds such a string, and skips a docstring and an error message."""
    sentence = "x" * (PROSE_LIMIT + 1)
    assert [line for line, _ in long_strings(f'def f():\n    """{sentence}"""\n    return "{sentence}"\n')] == [3]
    assert long_strings(f'def f():\n    raise ValueError(f"{sentence}")\n') == []
    prose = [f"{path.relative_to(PACKAGE)}:{line}: {text[:80]}…" for path in sorted(PACKAGE.rglob("*.py"))
             if path.name not in NOT_PROSE for line, text in long_strings(path.read_text())]
    assert not prose, "prose written in the library:\n" + "\n".join(prose)
