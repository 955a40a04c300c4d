"""Smoke-build the whole book in a temporary copy with tiny parameters, then check the HTML offline."""
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
import yaml
from bs4 import BeautifulSoup

REPO = Path(__file__).resolve().parent.parent
# Tiny parameters per notebook (on top of preset="cpu", use_cache=False); notebooks not listed get {}.
TINY_MWS = {"steps": 20, "eval_every": 10, "d_model": 16, "eval_batch": 32}
SMOKE_PARAMS = {
    "mws_plateau": {**TINY_MWS, "seeds": [0]},
    "mws_attention_bias": {**TINY_MWS, "seeds": [0], "steps_small_c": 20, "cs": [0.5, 1, 10], "switch_steps": [10]},
    "mws_optimal_init": {**TINY_MWS, "seeds": [1]},
    "llc_calibration": {"num_chains": 2, "num_draws": 10, "sgld_batch": 32, "train_steps": 20, "d_model": 16,
                        "golden_draws": 60, "golden_train_steps": 200, "epsilons": [0.001], "nbetas": [None],
                        "gammas": [100.0]},
}
COPIED = ["_config.yml", "_toc.yml", "notebooks", "plateau_lib", "scripts", "package.json", "package-lock.json",
          "results"]
TIMEOUT_S = 1800


def copy_sources(dest: Path) -> None:
    """The book's sources (not builds, caches or venvs) copied to dest; node_modules linked to save time."""
    ignore = shutil.ignore_patterns("__pycache__", ".ipynb_checkpoints", "*.pyc")
    for name in COPIED:
        src = REPO / name
        if src.is_dir():
            shutil.copytree(src, dest / name, ignore=ignore)
        elif src.exists():
            shutil.copy2(src, dest / name)
    (dest / "book").mkdir()
    for page in (REPO / "book").glob("*.md"):
        shutil.copy2(page, dest / "book" / page.name)
    if (REPO / "node_modules").is_dir():
        (dest / "node_modules").symlink_to(REPO / "node_modules")


def existing_chapters(root: Path) -> list[str]:
    """The figure chapters of root/_toc.yml; each must have its notebook."""
    toc = yaml.safe_load((root / "_toc.yml").read_text())
    names = [Path(c["file"]).name for c in toc["chapters"] if c["file"].startswith("book/figures/")]
    missing = [n for n in names if not (root / "notebooks" / f"{n}.ipynb").exists()]
    assert not missing, f"_toc.yml lists chapters with no notebook: {missing}"
    return names


def run(cmd, cwd, **env):
    """Run a command with OMP_NUM_THREADS=1 and no PRESET/FRESH from the caller; return the result."""
    environment = {k: v for k, v in os.environ.items() if k not in ("PRESET", "FRESH")}
    environment.update(OMP_NUM_THREADS="1", **env)
    return subprocess.run(cmd, cwd=cwd, env=environment, capture_output=True, text=True, timeout=TIMEOUT_S)


def check(result):
    assert result.returncode == 0, f"{result.args} failed:\n{result.stdout[-4000:]}\n{result.stderr[-4000:]}"


@pytest.fixture(scope="session")
def built_book(tmp_path_factory):
    """(html folder, figure names) of a smoke build in a temporary copy of the repository."""
    root = tmp_path_factory.mktemp("book_copy")
    copy_sources(root)
    names = existing_chapters(root)
    assert names, "no notebook listed in _toc.yml exists in notebooks/"
    check(run(["bash", "scripts/vendor_js.sh"], root))
    check(run([sys.executable, "scripts/run_notebooks.py", "--params-json", json.dumps({"use_cache": False}),
               "--notebook-params-json", json.dumps(SMOKE_PARAMS)], root, PRESET="cpu"))
    jupyter_book = Path(sys.executable).parent / "jupyter-book"
    check(run([str(jupyter_book), "build", ".", "--path-output", "book", "-W", "-n", "--keep-going"], root))
    return root / "book" / "_build" / "html", names


def pages(html: Path, names):
    return {name: BeautifulSoup((html / "book" / "figures" / f"{name}.html").read_text(), "html.parser")
            for name in names}


def test_every_toc_notebook_has_a_page(built_book):
    html, names = built_book
    assert (html / "index.html").exists() and (html / "book" / "intro.html").exists()
    for name in names:
        assert (html / "book" / "figures" / f"{name}.html").exists(), name


def test_figure_pages_show_images_that_exist(built_book):
    html, names = built_book
    for name, soup in pages(html, names).items():
        images = soup.select("main img") or soup.find_all("img")
        if name != "reproducibility":
            assert images, f"{name}: no <img> on the page"
        for img in images:
            if not img["src"].startswith("data:"):
                assert (html / "book" / "figures" / img["src"]).resolve().exists(), f"{name}: missing {img['src']}"


def test_no_error_outputs(built_book):
    html, names = built_book
    for name, soup in pages(html, names).items():
        assert not soup.select("div.output.traceback"), f"{name}: a cell raised"
        for stderr in soup.select("div.output.stderr"):
            assert "Traceback" not in stderr.get_text() and "Error" not in stderr.get_text(), \
                f"{name}: error on stderr: {stderr.get_text()[:500]}"
        assert "An Exception was encountered" not in soup.get_text(), f"{name}: papermill exception banner"


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
