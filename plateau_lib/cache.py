"""Result cache: a run's tidy tables and small arrays on disk, keyed by its full config.

The key is a hash of the config (plus any extra inputs, e.g. the reference run an initialisation
came from) and ``RESULTS_VERSION``; bump the version whenever the computation behind a result
changes. Lookups try committed results under ``results/`` first, then the local ``.cache/results``.
New results are written atomically to ``.cache/results``; copy a compact, expensive one to
``results/`` to commit it without ``final_state.pt`` (its ``meta.json`` carries the provenance).
"""
from __future__ import annotations

import datetime as dt
import fcntl
import hashlib
import json
import shutil
from pathlib import Path

import pandas as pd

from .report import git_commit
from .train import TrainConfig, TrainResult, train
from .utils import atomic_path

RESULTS_VERSION = 1
ROOT = Path(__file__).resolve().parent.parent
COMMITTED = ROOT / "results"
LOCAL = ROOT / ".cache" / "results"


def cache_key(config: dict, extra=None) -> str:
    blob = json.dumps({"config": config, "extra": extra, "version": RESULTS_VERSION}, sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


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
    LOCAL.mkdir(parents=True, exist_ok=True)
    with open(LOCAL / f"train-{key}.lock", "w") as lock:  # one process computes a key; others wait, then load
        fcntl.flock(lock, fcntl.LOCK_EX)
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
        shutil.rmtree(partial, ignore_errors=True)
    result.meta["cache"] = None
    return result


def provenance(meta: dict) -> str:
    """One line saying where a result came from."""
    cached = f", loaded from {meta['cache']}" if meta.get("cache") else ""
    return (f"computed on {meta.get('device', '?')} at commit {meta.get('commit', '?')} on {meta.get('date', '?')}, "
            f"wall time {meta.get('wall_time_s', float('nan')):.1f} s, torch {meta.get('torch', '?')}{cached}")


def provenance_table(results: dict, label: str) -> pd.DataFrame:
    """One row per run (``results`` maps a label such as a seed or condition to a TrainResult)."""
    rows = [{label: key, "device": r.meta.get("device"), "wall time (s)": r.meta.get("wall_time_s"),
             "source": f"loaded from {r.meta['cache']}" if r.meta.get("cache") else "computed in this run",
             "commit": r.meta.get("commit"), "date": r.meta.get("date")}
            for key, r in results.items()]
    return pd.DataFrame(rows)


def print_provenance(results: dict, label: str) -> None:
    print("Provenance:")
    print(provenance_table(results, label).to_string(index=False))
