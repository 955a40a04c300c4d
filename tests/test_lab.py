"""`make lab`'s server: JupyterLab on 127.0.0.1 with a token serves its own page and the book's notebooks, offline
(no request leaves this machine). Bounded in time; the server is stopped at the end."""
import contextlib
import json
import os
import shutil
import socket
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from plateau_lib.book import lab as lab_copy

REPO = Path(__file__).resolve().parent.parent
JUPYTER = Path(__import__("sys").executable).with_name("jupyter")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def get(url: str):
    with urllib.request.urlopen(url, timeout=10) as r:
        return r.status, r.read()


NO_LAB = not JUPYTER.exists() or shutil.which("jupyter-lab", path=str(JUPYTER.parent)) is None
NO_LAB_REASON = "JupyterLab is not installed in this environment (requirements.txt installs it)"


ANNOUNCEMENTS = "@jupyterlab/apputils-extension:announcements"  # the news prompt, and its request for a feed


def private_jupyter(root: Path) -> tuple[dict, list[str]]:
    """A Jupyter of its own under ``root`` (as on a fresh machine, whatever the user's folders hold): the
    environment and JupyterLab arguments for private config, data, runtime, IPython, settings and workspace
    folders, with the announcements and the update check turned off."""
    env = dict(os.environ)
    for var, sub in (("JUPYTER_CONFIG_DIR", "config"), ("JUPYTER_DATA_DIR", "data"),
                     ("JUPYTER_RUNTIME_DIR", "runtime"), ("IPYTHONDIR", "ipython")):
        (root / sub).mkdir(parents=True, exist_ok=True)
        env[var] = str(root / sub)
    (root / "config" / "labconfig").mkdir(exist_ok=True)
    (root / "config" / "labconfig" / "page_config.json").write_text(
        json.dumps({"disabledExtensions": {ANNOUNCEMENTS: True}}))
    return env, [f"--LabApp.user_settings_dir={root / 'settings'}", f"--LabApp.workspaces_dir={root / 'workspaces'}",
                 "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate"]


@contextlib.contextmanager
def lab(notebook_dir: Path, cwd: Path, token: str = "plateau-test-token", expose_app: bool = False):
    """`make lab`'s server on a free loopback port, with its own Jupyter folders under ``cwd``
    (``private_jupyter``); yields its base URL and token; stopped at the end."""
    port = free_port()
    env, private = private_jupyter(cwd / "jupyter")
    server = subprocess.Popen([str(JUPYTER), "lab", "--ip", "127.0.0.1", "--port", str(port), "--no-browser",
                               "--notebook-dir", str(notebook_dir), f"--IdentityProvider.token={token}",
                               "--ServerApp.port_retries=0", "--LabApp.extension_manager=readonly", *private,
                               *(["--LabApp.expose_app_in_browser=True"] if expose_app else []),
                               *(["--allow-root"] if os.geteuid() == 0 else [])],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=cwd, env=env)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.time() + 90
        while True:
            try:
                get(f"{base}/api/status?token={token}")
                break
            except (urllib.error.URLError, ConnectionError):
                assert server.poll() is None and time.time() < deadline, "JupyterLab did not start within 90 s"
                time.sleep(0.5)
        yield base, token
    finally:
        server.terminate()
        try:
            server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            server.kill()


@pytest.mark.skipif(NO_LAB, reason=NO_LAB_REASON)
def test_lab_serves_the_notebooks_on_loopback_with_a_token(tmp_path):
    lab_copy.prepare(dst=tmp_path / "notebooks")  # what `make lab` serves
    with lab(tmp_path / "notebooks", tmp_path) as (base, token):
        status, _ = get(f"{base}/api/status?token={token}")
        assert status == 200
        with pytest.raises(urllib.error.HTTPError) as refused:  # no token, no notebook
            get(f"{base}/api/contents/mws_plateau.ipynb")
        assert refused.value.code == 403
        status, body = get(f"{base}/api/contents/mws_plateau.ipynb?token={token}")
        notebook = json.loads(body)
        assert status == 200 and notebook["type"] == "notebook"
        assert any("parameters" in c["metadata"].get("tags", []) for c in notebook["content"]["cells"])
        status, page = get(f"{base}/lab?token={token}")
        assert status == 200 and b"JupyterLab" in page
        status, _ = get(f"{base}/api/kernelspecs?token={token}")
        assert status == 200


# Run every cell of the notebook at path arguments[0] through JupyterLab's own command, once its kernel is idle.
# The app may not exist yet when the page's load event fires. The panel is found by its path and activated (a headless browser may never give it focus, so the shell's current
# widget can stay empty); the script answers within SCRIPT_S, "waiting" while the kernel is not idle yet.
SCRIPT_S = 60  # each script's bound; selenium's own HTTP client gives up on a command at 120 s
RUN_ALL = """
const done = arguments[arguments.length - 1];
const path = arguments[0], until = Date.now() + 1000 * (arguments[1] - 5);
(async () => {
  while (!window.jupyterapp && Date.now() < until) await new Promise((r) => setTimeout(r, 200));
  const app = window.jupyterapp;
  if (!app) { done("waiting"); return; }
  await app.restored;
  while (Date.now() < until) {
    const panel = [...app.shell.widgets("main")].find((w) => w.context && w.context.path === path);
    const context = panel && panel.sessionContext;
    if (context && context.session && context.session.kernel && context.kernelDisplayStatus === "idle") {
      app.shell.activateById(panel.id);
      await app.commands.execute("notebook:run-all-cells");
      done("ran"); return;
    }
    await new Promise((r) => setTimeout(r, 200));
  }
  done("waiting");
})().catch((err) => done("failed: " + err));
"""


def run_all_cells(browser, path: str, within_s: float = 240) -> str:
    """Run every cell of the open notebook ``path`` once its kernel is idle (``RUN_ALL``, asked again while
    it waits, up to ``within_s``); its last answer."""
    deadline, answer = time.time() + within_s, "waiting"
    browser.set_script_timeout(SCRIPT_S)
    while answer == "waiting" and time.time() < deadline:
        answer = browser.execute_async_script(RUN_ALL, path, SCRIPT_S)
    return answer if answer != "waiting" else f"the kernel of {path} was not idle within {within_s} s"


# The live panel's image: its src (a new blob URL each time the figure changes).
PANEL_IMAGE = """
const imgs = [...document.querySelectorAll("img.widget-image")];
return imgs.length ? (imgs[imgs.length - 1].getAttribute("src") || "") : null;
"""


@pytest.mark.skipif(NO_LAB, reason=NO_LAB_REASON)
def test_a_live_panel_runs_in_jupyterlab_in_a_real_browser(browser, tmp_path):
    """Open the MWS plateau notebook in JupyterLab: its citation reads as author–year text. Run all cells, move
    the seed slider, press Run: a new figure appears, and the browser console has no severe error. Served from
    `make lab`'s copy of notebooks/, on the loopback address only, bounded in time."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys
    from selenium.webdriver.support.ui import WebDriverWait
    lab_copy.prepare(dst=tmp_path / "notebooks")  # what `make lab` serves (autosave stays there)
    with lab(tmp_path / "notebooks", tmp_path, expose_app=True) as (base, token):
        browser.get_log("browser")  # drop what earlier pages logged
        browser.get(f"{base}/lab/tree/mws_plateau.ipynb?token={token}")
        assert run_all_cells(browser, "mws_plateau.ipynb") == "ran"
        opening = browser.find_element(By.CSS_SELECTOR, ".jp-RenderedMarkdown").text
        assert "Gopalani and Hu, 2025" in opening and "{cite}" not in opening, opening[:300]
        run = WebDriverWait(browser, 240, poll_frequency=1).until(
            lambda d: next((b for b in d.find_elements(By.CSS_SELECTOR, "button.widget-button")
                            if b.text.strip() == "Run"), None))
        before = browser.execute_script(PANEL_IMAGE)
        seed = next(w for w in browser.find_elements(By.CSS_SELECTOR, ".widget-slider")
                    if w.text.strip().startswith("seed"))
        handle = seed.find_element(By.CSS_SELECTOR, ".noUi-handle")
        browser.execute_script("arguments[0].scrollIntoView({block: 'center'});", handle)
        handle.click()
        handle.send_keys(Keys.ARROW_RIGHT)
        WebDriverWait(browser, 10).until(lambda d: "1" in seed.find_element(By.CSS_SELECTOR, ".widget-readout").text)
        run.click()
        WebDriverWait(browser, 180, poll_frequency=1).until(lambda d: d.execute_script(PANEL_IMAGE) != before)
        size = browser.execute_script("const i = [...document.querySelectorAll('img.widget-image')].pop(); "
                                      "return [i.naturalWidth, i.naturalHeight];")
        assert size[0] > 300 and size[1] > 200, f"the new figure is {size} px"
        severe = [e["message"] for e in browser.get_log("browser") if e["level"] == "SEVERE"]
        assert not severe, severe
