"""Every page's "try it" panel in a live kernel (nbclient), as a reader in JupyterLab uses it: the notebook's own
cells up to its panel (only the parameters, the setup and the panel cell where the panel needs nothing else), then
the controls set from Python and Run pressed (or a continuous control moved). The figure must change, the run must
carry the chosen values, and a second Run with the same values must be a cache hit. New runs go to a scratch cache."""
import ast

import nbformat
import pytest
from nbclient import NotebookClient

from conftest import REPO

# notebook: (the controls to set, what the run must carry, whether the panel has a Run button)
PANELS = {
    "icl_stages_live": ('panel.controls["steps"].value, panel.controls["d_model"].value = 500, 16',
                        '(panel.result.config["steps"], panel.result.config["d_model"]) == (500, 16)', True),
    "task_diversity": ('panel.controls["M"].value, panel.controls["steps"].value = "2", 500',
                       '(panel.result.config["task_kwargs"]["M"], panel.result.config["steps"]) == (2, 500)', True),
    "transient_ridge_live": ('panel.controls["M"].value, panel.controls["steps"].value = "4", 500',
                             '(panel.result.config["task_kwargs"]["M"], panel.result.config["steps"]) == (4, 500)', True),
    "other_tasks": ('panel.controls["task"].value, panel.controls["steps"].value = "repeat_1", 40',
                    '(panel.result.config["task"], panel.result.config["steps"]) == ("repeat", 40)', True),
    "mws_attention_bias": ('for name, value in dict(c=2.5, switch_step=50, seed=3, steps=100).items():\n'
                           '    panel.controls[name].value = value',
                           '(panel.result.config["attn_bias_c"], panel.result.config["attn_bias_from"], '
                           'panel.result.config["seed"], panel.result.config["steps"]) == (2.5, 50, 3, 100)', True),
    "mws_optimal_init": ('panel.controls["groups"].value, panel.controls["seed"].value = ("kq",), 2\n'
                         'panel.controls["steps"].value = 100',
                         '(tuple(panel.result.config["copy_groups"]), panel.result.config["seed"]) == (("kq",), 2)', True),
    "low_task_diversity": ('panel.controls["M"].value = 4', 'panel.result["M"] == 4', False),
    "llc_calibration": ('panel.controls["draws"].value = 200', 'panel.result.loss_trace.shape[1] == 200', False),
    "llm_collapse": ('panel.controls["prompt"].value = 5', 'panel.result["prompt"] == 5', False),
}


def tags(cell) -> list:
    return cell.get("metadata", {}).get("tags", [])


def assigned(cells) -> set:
    names = set()
    for cell in cells:
        for node in ast.walk(ast.parse(cell.source)):
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                names.add(node.id)
            elif isinstance(node, (ast.Import, ast.ImportFrom)):
                names.update((a.asname or a.name).split(".")[0] for a in node.names)
    return names


def panel_cells(nb) -> list:
    """The notebook's cells a kernel must run to show its panel, the panel cell last, with the panel bound to
    ``panel``."""
    code = [c for c in nb.cells if c.cell_type == "code"]
    at = next(i for i, c in enumerate(code) if "_panel(" in c.source)
    setup = [c for c in code[:at] if "parameters" in tags(c) or "pages.setup()" in c.source]
    tree = ast.parse(code[at].source)
    loaded = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
    needs = loaded - assigned(setup + [code[at]]) - set(dir(__builtins__))
    cells = setup if not needs else code[:at]
    last = tree.body[-1]
    source = code[at].source
    if isinstance(last, ast.Expr):  # the panel is the cell's value: bind it
        lines = source.splitlines()
        head, expr = lines[:last.lineno - 1], "\n".join(lines[last.lineno - 1:])
        source = "\n".join([*head, f"panel = {expr}"])
    return [*cells, nbformat.v4.new_code_cell(source)]


def test_every_page_with_a_panel_is_covered():
    pages = {p.stem for p in (REPO / "notebooks").glob("*.ipynb")
             if "_panel(" in p.read_text() and p.stem != "mws_plateau"}  # Fig. 2: test_panels.py, the whole notebook
    assert pages == set(PANELS)


@pytest.mark.parametrize("page", sorted(PANELS))
def test_in_a_kernel_the_panel_runs_the_chosen_values(page, tmp_path):
    set_controls, carries, button = PANELS[page]
    nb = nbformat.read(REPO / "notebooks" / f"{page}.ipynb", as_version=4)
    cells = panel_cells(nb)
    check = [
        "from plateau_lib.engine import cache",
        f"cache.use(cache.Store(cache.DEFAULT.committed, {str(tmp_path / 'local')!r}))   # new runs: a scratch cache",
        "before = bytes(panel.image.value)",
        set_controls,
        *(["panel.button.click()"] if button else []),
        "assert panel.error is None, panel.error",
        'assert bytes(panel.image.value) != before and bytes(panel.image.value)[:4] == b"\\x89PNG"',
        f"assert {carries}, panel.result",
        *(['assert not panel.result.meta["cache"], "the first Run computes"',
           "panel.button.click()",
           'assert panel.error is None and panel.result.meta["cache"], "a second Run with the same values is a cache hit"']
          if button else []),
        'print("panel ok")']
    nb.cells = [*cells, nbformat.v4.new_code_cell("\n".join(check))]
    NotebookClient(nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(REPO)}}).execute()
    assert "panel ok" in "".join(o.get("text", "") for o in nb.cells[-1].outputs)
