"""Run summaries: each figure notebook records paper-vs-ours numbers; the reproducibility page tabulates them.

Summaries written by a run go to ``.cache/summaries/<figure>-<preset>.json`` (not committed);
reviewed ones are committed under ``results/summaries/``. A local summary wins over a committed one
for the same figure and preset.
"""
from __future__ import annotations

import json
import re
import subprocess
from datetime import datetime, timezone
from pathlib import Path

import pandas as pd

from plateau_lib.utils import write_json

REPO_ROOT = Path(__file__).resolve().parent.parent
LOCAL_SUMMARIES = REPO_ROOT / ".cache" / "summaries"
COMMITTED_SUMMARIES = REPO_ROOT / "results" / "summaries"
COLUMNS = ["figure", "metric", "paper", "ours", "preset", "device", "seeds", "wall_time_s", "date", "commit", "source"]


def git_commit(root: Path | None = None) -> str:
    """Short hash of HEAD; 'uncommitted' in a repository with no commits; 'unknown' without git."""
    root = REPO_ROOT if root is None else root
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


def record_summary(figure: str, preset: str, device: str, seeds: list, wall_time_s: float,
                   rows: list[dict]) -> Path:
    """Write one run's summary; each row is {"metric": str, "paper": float|str|None, "ours": float}."""
    for row in rows:
        if set(row) != {"metric", "paper", "ours"}:
            raise ValueError(f"summary rows need exactly the keys metric, paper, ours; got {sorted(row)}")
    summary = {
        "figure": figure, "preset": preset, "device": str(device), "seeds": list(seeds),
        "wall_time_s": float(wall_time_s), "rows": rows,
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "commit": git_commit(),
    }
    slug = re.sub(r"[^A-Za-z0-9_]+", "-", figure).strip("-").lower()
    path = LOCAL_SUMMARIES / f"{slug}-{preset}.json"
    write_json(path, summary)
    return path


def _read(folder: Path, source: str) -> dict[tuple[str, str], dict]:
    summaries = {}
    for path in sorted(folder.glob("*.json")):
        summary = json.loads(path.read_text())
        summaries[(summary["figure"], summary["preset"])] = dict(summary, source=source)
    return summaries


def load_summaries() -> pd.DataFrame:
    """One row per (figure, preset, metric), committed summaries overridden by local ones."""
    summaries = _read(COMMITTED_SUMMARIES, "committed") | _read(LOCAL_SUMMARIES, "this machine")
    records = [
        {**{k: s[k] for k in COLUMNS if k in s}, "seeds": ", ".join(map(str, s["seeds"])),
         "metric": row["metric"], "paper": row["paper"], "ours": row["ours"]}
        for s in summaries.values() for row in s["rows"]
    ]
    return pd.DataFrame.from_records(records, columns=COLUMNS)


def mean_sd(values) -> str:
    """'mean ± sd (n = k)' over the finite values; 'n/a (no run reached it)' if there are none."""
    v = pd.Series(values, dtype=float).dropna()
    if v.empty:
        return "n/a (no run reached it)"
    sd = f" ± {v.std(ddof=1):.3g}" if len(v) > 1 else ""
    return f"{v.mean():.3g}{sd} (n = {len(v)})"


def finite(x) -> float:
    """A summary value as float (NaN for None)."""
    return float("nan") if x is None or pd.isna(x) else float(x)
