"""Result cache: a run's tidy tables and small arrays on disk, keyed by its full config.

The key is a hash of the config (plus any extra inputs, e.g. the reference run an initialisation
came from) and ``RESULTS_VERSION``; bump the version whenever the computation behind a result
changes. Lookups try committed results under ``results/`` first, then the local ``.cache/results``.
New results are written atomically to ``.cache/results``; copy a compact, expensive one to
``results/`` to commit it without ``final_state.pt`` (its ``meta.json`` carries the provenance).
"""
from __future__ import annotations

import datetime as dt
import hashlib
import json
import subprocess
from pathlib import Path

from .train import TrainConfig, TrainResult, train
from .utils import atomic_path

RESULTS_VERSION = 1
ROOT = Path(__file__).resolve().parent.parent
COMMITTED = ROOT / "results"
LOCAL = ROOT / ".cache" / "results"


def cache_key(config: dict, extra=None) -> str:
    blob = json.dumps({"config": config, "extra": extra, "version": RESULTS_VERSION}, sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def git_commit() -> str:
    try:
        out = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True,
                             text=True, timeout=10)
        return out.stdout.strip() or "uncommitted"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def find(kind: str, key: str) -> Path | None:
    for base in (COMMITTED, LOCAL):
        path = base / f"{kind}-{key}"
        if (path / "meta.json").exists():
            return path
    return None


def cached_train(cfg: TrainConfig, use_cache: bool = True, init_state=None, extra=None, progress=True,
                 need_state: bool = False) -> TrainResult:
    """``train(cfg)`` through the cache. An interrupted run resumes from its partial folder.

    need_state: the caller needs ``final_state`` (the trained weights); committed results carry only
    tables and arrays, so such a hit is recomputed locally.
    """
    key = cache_key(cfg.to_dict(), extra)
    hit = find("train", key) if use_cache else None
    if hit is not None and need_state and not (hit / "final_state.pt").exists():
        hit = LOCAL / f"train-{key}" if (LOCAL / f"train-{key}" / "final_state.pt").exists() else None
    if hit is not None:
        result = TrainResult.load(hit)
        result.meta["cache"] = str(hit.relative_to(ROOT)) if hit.is_relative_to(ROOT) else str(hit)
        return result
    partial = LOCAL / f"train-{key}.partial"
    partial.mkdir(parents=True, exist_ok=True)
    result = train(cfg, init_state=init_state, run_dir=partial, progress=progress)
    result.meta.update(commit=git_commit(), date=dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
                       results_version=RESULTS_VERSION, key=key, extra=extra)
    with atomic_path(LOCAL / f"train-{key}") as tmp:
        result.save(tmp)
    for f in partial.iterdir():
        f.unlink()
    partial.rmdir()
    result.meta["cache"] = None
    return result


def provenance(meta: dict) -> str:
    """One line saying where a result came from."""
    cached = f", loaded from {meta['cache']}" if meta.get("cache") else ""
    return (f"computed on {meta.get('device', '?')} at commit {meta.get('commit', '?')} on {meta.get('date', '?')}, "
            f"wall time {meta.get('wall_time_s', float('nan')):.1f} s, torch {meta.get('torch', '?')}{cached}")
