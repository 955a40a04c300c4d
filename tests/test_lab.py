"""`make lab`'s server: JupyterLab on 127.0.0.1 with a token serves its own page and the book's notebooks, offline
(no request leaves this machine). Bounded in time; the server is stopped at the end."""
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

REPO = Path(__file__).resolve().parent.parent
JUPYTER = Path(__import__("sys").executable).with_name("jupyter")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def get(url: str):
    with urllib.request.urlopen(url, timeout=10) as r:
        return r.status, r.read()


@pytest.mark.skipif(not JUPYTER.exists() or shutil.which("jupyter-lab", path=str(JUPYTER.parent)) is None,
                    reason="JupyterLab is not installed in this environment (requirements.txt installs it)")
def test_lab_serves_the_notebooks_on_loopback_with_a_token(tmp_path):
    port, token = free_port(), "plateau-test-token"
    server = subprocess.Popen([str(JUPYTER), "lab", "--ip", "127.0.0.1", "--port", str(port), "--no-browser",
                               "--notebook-dir", str(REPO / "notebooks"), f"--IdentityProvider.token={token}",
                               "--ServerApp.port_retries=0", "--LabApp.extension_manager=readonly",
                               *(["--allow-root"] if os.geteuid() == 0 else [])],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=tmp_path)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.time() + 90
        while True:
            try:
                status, _ = get(f"{base}/api/status?token={token}")
                break
            except (urllib.error.URLError, ConnectionError):
                assert server.poll() is None and time.time() < deadline, "JupyterLab did not start within 90 s"
                time.sleep(0.5)
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
    finally:
        server.terminate()
        try:
            server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            server.kill()
