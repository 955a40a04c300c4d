"""Small shared helpers: device choice, seeding, CPU threads, atomic file writes."""
from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
import tempfile
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import torch

REPO_ROOT = Path(__file__).resolve().parents[2]  # the repository (results/, .cache/, .git)
DEVICES = ("auto", "cpu", "cuda", "mps")


def resolve_device(device: str = "auto") -> torch.device:
    """'auto' picks cuda, then mps, then cpu; anything else must be one of DEVICES (optionally 'cuda:N')."""
    if not isinstance(device, str) or device.split(":")[0] not in DEVICES:
        raise ValueError(f"device must be one of {DEVICES} (or 'cuda:N'), got {device!r}")
    if device == "auto":
        if torch.cuda.is_available():
            return torch.device("cuda")
        if getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available():
            return torch.device("mps")
        return torch.device("cpu")
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise ValueError(f"device={device!r} was requested but CUDA is not available; use 'auto' or 'cpu'")
    return torch.device(device)


def in_book_build() -> bool:
    """True when the code runs inside ``scripts/run_notebooks.py`` (the book build): progress bars stay off."""
    return os.environ.get("PLATEAU_BOOK_BUILD", "") not in ("", "0")


def seed_everything(seed: int) -> None:
    """Seed Python, NumPy and torch (all devices)."""
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


def cpu_threads(n: int | None = None) -> int:
    """Use n intra-op threads (default: $OMP_NUM_THREADS or 1); two busy threads thrash on 2 cores."""
    n = int(os.environ.get("OMP_NUM_THREADS", 1)) if n is None else n
    torch.set_num_threads(max(1, n))
    return torch.get_num_threads()


@contextmanager
def atomic_path(path: str | os.PathLike):
    """Yield a temporary path next to ``path``; on success it is renamed onto ``path`` (file or folder)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}.", dir=path.parent)) / path.name
    try:
        yield tmp
        if path.is_dir() and not path.is_symlink():
            old = path.with_name(f".{path.name}.old-{os.getpid()}")
            os.replace(path, old)
            os.replace(tmp, path)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(tmp, path)
    finally:
        shutil.rmtree(tmp.parent, ignore_errors=True)


def write_json(path, obj) -> None:
    """Write JSON atomically."""
    with atomic_path(path) as tmp:
        tmp.write_text(json.dumps(obj, indent=1, sort_keys=True, default=str))


def torch_save(obj, path) -> None:
    """torch.save atomically (load it back with ``torch.load(path, weights_only=True)``)."""
    with atomic_path(path) as tmp:
        torch.save(obj, tmp)


def git_commit(root: Path | None = None) -> str:
    """Short hash of HEAD; 'uncommitted' in a repository with no commits; $PLATEAU_COMMIT or 'unknown'
    without git (a copy of the working tree, e.g. on a lent GPU machine, is told its commit that way)."""
    root = REPO_ROOT if root is None else root
    if not (root / ".git").exists() and os.environ.get("PLATEAU_COMMIT"):
        return os.environ["PLATEAU_COMMIT"]
    try:
        head = subprocess.run(["git", "-C", str(root), "rev-parse", "--short", "HEAD"],
                              capture_output=True, text=True, timeout=10)
        if head.returncode == 0:
            return head.stdout.strip()
        inside = subprocess.run(["git", "-C", str(root), "rev-parse", "--git-dir"],
                                capture_output=True, text=True, timeout=10)
        return "uncommitted" if inside.returncode == 0 else "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def shown_path(path: Path) -> str:
    """``path`` as a page or a command shows it: relative to the repository where it is inside it."""
    return str(path.relative_to(REPO_ROOT)) if path.is_relative_to(REPO_ROOT) else str(path)
