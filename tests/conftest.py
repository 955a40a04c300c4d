"""Shared fixtures: one thread for torch, a seeded generator, and a smoke build of the whole book."""
import json
import os
import shutil
import subprocess
import sys
import tempfile
from contextlib import ExitStack
from pathlib import Path

import pytest
import torch
import yaml

os.environ.setdefault("OMP_NUM_THREADS", "1")
torch.set_num_threads(1)


@pytest.fixture
def gen():
    return torch.Generator().manual_seed(1234)


@pytest.fixture
def use_store():
    """``use_store(committed=..., local=...)`` makes a store of those folders (each left out: the current store's)
    current for the rest of the test, and returns it; the one before is current again after the test."""
    from plateau_lib.engine import cache
    with ExitStack() as stack:
        def use(committed=None, local=None):
            now = cache.current()
            return stack.enter_context(cache.using(cache.Store(now.committed if committed is None else committed,
                                                               now.local if local is None else local)))
        yield use


REPO = Path(__file__).resolve().parent.parent
# Tiny parameters per notebook (on top of preset="cpu", use_cache=False); notebooks not listed get {}.
TINY_MWS = {"steps": 20, "eval_every": 10, "d_model": 16, "eval_batch": 32}
SMOKE_PARAMS = {
    "mws_plateau": {**TINY_MWS, "seeds": [0]},
    "mws_attention_bias": {**TINY_MWS, "seeds": [0], "steps_small_c": 20, "cs": [0.5, 1, 10], "switch_steps": [10]},
    "mws_optimal_init": {**TINY_MWS, "seeds": [1]},
    "llc_calibration": {"num_chains": 2, "num_draws": 10, "sgld_batch": 32, "train_steps": 20, "d_model": 16,
                        "golden_draws": 60, "golden_train_steps": 200, "epsilons": [0.001], "nbetas": [None],
                        "gammas": [100.0], "golden_longer": 0},
    "llc_failures": {"num_chains": 2, "num_draws": 10, "sgld_batch": 32, "train_steps": 20, "d_model": 16,
                     "epsilons": [0.001]},
    "icl_stages_live": {"steps": 40, "d_model": 16, "num_chains": 2, "num_draws": 10, "sgld_batch": 32,
                        "overrides": {"eval_batch": 64}},
    "icl_stages_heads": {"frames": 3},
    "transient_ridge_live": {"steps": 40, "num_draws": 10, "overrides": {"eval_batch": 64}},
    "task_diversity": {"steps": 40, "overrides": {"eval_batch": 64}},
    "low_task_diversity": {"steps": 40, "overrides": {"eval_batch": 64}, "num_draws": 10, "n_sequences": 256,
                           "sequences": 2},
    "other_tasks": {"tasks": ["prefix sum", "permutation", "repeat_1"], "overrides": {"steps": 20, "d_model": 16,
                                                                                     "eval_batch": 32}},
    "mws_probe_and_locations": {"steps": 20, "d_model": 16, "seeds": [0], "checkpoint_every": 10, "train_seqs": 16,
                                "test_seqs": 16, "max_iter": 10, "overrides": {"eval_batch": 32}},
    "mws_training_setups": {"setups": ["baseline", "Muon"], "seeds": [0],
                            "overrides": {"steps": 20, "d_model": 16, "eval_batch": 32}},
    "plateau_llc": {"checkpoints": [0, 5, 10, 15, 20], "num_chains": 2, "num_draws": 20, "sgld_batch": 16},
    "llm_collapse": {"overrides": {"n_layer": 1, "d_model": 16, "n_head": 2, "d_ff": 32, "batch_size": 2,
                                   "context": 16, "steps": 4, "corpus": ["boolq"]}, "seeds": [0], "n_prompts": 4},
}
COPIED = ["_config.yml", "_toc.yml", "pyproject.toml", "notebooks", "plateau_lib", "scripts", "package.json",
          "package-lock.json", "results", "book"]
TIMEOUT_S = 1800


def copy_sources(dest: Path) -> None:
    """The book's sources (not builds, caches or venvs) copied to dest; node_modules linked to save time."""
    ignore = shutil.ignore_patterns("__pycache__", ".ipynb_checkpoints", "*.pyc", "_build", "_vendor_js")
    for name in COPIED:
        src = REPO / name
        if src.is_dir():
            shutil.copytree(src, dest / name, ignore=ignore)
        elif src.exists():
            shutil.copy2(src, dest / name)
    shutil.rmtree(dest / "book" / "figures", ignore_errors=True)  # executed notebooks: build outputs
    if (REPO / "node_modules").is_dir():
        (dest / "node_modules").symlink_to(REPO / "node_modules")


def toc_files(root: Path) -> list[str]:
    """Every chapter file of root/_toc.yml, part by part, in book order."""
    toc = yaml.safe_load((root / "_toc.yml").read_text())
    return [c["file"] for part in toc["parts"] for c in part["chapters"]]


def existing_chapters(root: Path) -> list[str]:
    """The figure chapters of root/_toc.yml (in book order); each must have its notebook."""
    names = [Path(f).name for f in toc_files(root) if f.startswith("book/figures/")]
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


# ---- headless Chromium (the browser tests: the built book, and JupyterLab with a live panel) ----------------

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"]
WINDOW = (1400, 1000)
WAIT_S = 30


@pytest.fixture(scope="session")
def browser():
    """Headless Debian Chromium driven by selenium, with the console log recorded; skipped without them."""
    try:
        from selenium import webdriver
        from selenium.common.exceptions import WebDriverException
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        pytest.skip("selenium is not installed (pip install -r requirements.txt)")
    for path in (CHROMIUM, CHROMEDRIVER):
        if not Path(path).is_file():
            pytest.skip(f"{path} not found (apt-get install chromium chromium-driver)")
    profile = tempfile.mkdtemp(prefix="chromium-profile-")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in FLAGS:
        options.add_argument(flag)
    options.add_argument(f"--user-data-dir={profile}")
    options.add_argument("--window-size={},{}".format(*WINDOW))
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    try:
        driver = webdriver.Chrome(options=options, service=Service(CHROMEDRIVER))
    except WebDriverException as err:
        shutil.rmtree(profile, ignore_errors=True)
        pytest.skip(f"headless chromium does not start here: {err.msg}")
    driver.set_script_timeout(WAIT_S)
    yield driver
    driver.quit()
    shutil.rmtree(profile, ignore_errors=True)
