"""Benchmark records: each script in ``benchmarks/`` writes one JSON file into ``results/benchmarks/``, and
the Performance page reads them all back.

A record is ``{"benchmark", "machine", "device", "threads", "date", "commit", "rows", "ratios"}`` plus an
optional ``"args"`` (the run's arguments and anything else it wants to keep, e.g. the load average).
``rows`` is a list of ``{"workload", "variant", <measured figures>}``; ``ratios`` is ``{name: value}``,
every ratio measured side by side in the same process as the rows. Every benchmark times a *floor*, a
plain eager forward+backward of the same model and batch, so that its ratios say how far above the bare
cost of a gradient each variant is.

The timing helpers (``timed``, ``floor_step``) live here so that both scripts time the floor the same way.
"""
from __future__ import annotations

import json
import math
import os
import platform
import textwrap
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable

import pandas as pd

from plateau_lib.book.pages import HEADER_WORDS, header_words, MIN_FONT_PT, PAGE_WIDTH_IN
from plateau_lib.engine.utils import git_commit, REPO_ROOT, write_json


BENCH_DIR = REPO_ROOT / "results" / "benchmarks"
KEYS = ("benchmark", "machine", "device", "threads", "date", "commit", "rows", "ratios")
RUN_COLUMNS = ["benchmark", "machine", "device", "threads", "date", "commit", "args", "file"]
# Titles of the benchmarks, by the name before the device suffix (``llc_bench-cpu`` -> ``llc_bench``).
TITLES = {"train": "Training loop: metrics, stacked runs and the floor",
          "train_bench": "Training loop: with and without the chapter metrics",
          "llc_bench": "LLC estimator: ours vs devinterp",
          "llc": "LLC estimator: sequential, vmap and compiled backends vs devinterp and the floor",
          "llc_devinterp2": "LLC estimator: ours vs devinterp 2.0.1 (in its own venv) and the floor",
          "llm": "Collapse chapter: the miniature's training step, and the batched analysis vs the paper's loop",
          "icl": "Stages page, paper preset: a training step and a λ̂ checkpoint against their floors",
          "gpu": "On a GPU: stacked training of the papers' models against the floor",
          "costs": "The paper queue's CPU cost model: its estimate against a measured run"}


# ---- where a run happened ----------------------------------------------------------------------------

def cpu_model() -> str:
    """The CPU's model name from /proc/cpuinfo (Linux), else ``platform.processor()``."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.lower().startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def machine() -> str:
    """e.g. ``Linux x86_64, AMD EPYC 7B13, 2 cores``."""
    return f"{platform.system()} {platform.machine()}, {cpu_model()}, {os.cpu_count()} cores"


def device_name(device="cpu") -> str:
    """``"cpu"``, or the CUDA device's name (e.g. ``NVIDIA H100 80GB HBM3``); other devices by their type."""
    import torch
    device = torch.device(device)
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    return device.type


def loadavg() -> list[float] | None:
    """1, 5 and 15 minute load averages (None where the OS has none)."""
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except (AttributeError, OSError):
        return None


# ---- timing ------------------------------------------------------------------------------------------
# Every time is taken twice: wall seconds, and this process's CPU seconds (``time.process_time``). With one
# thread on a shared CPU, other work stretches the wall time but hardly the CPU time, so CPU-time ratios
# stay meaningful on a busy machine; on a GPU only wall time means anything.

def synchronize(device="cpu") -> None:
    import torch
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize(device)


def timed(fn: Callable[[], object], device="cpu") -> tuple[float, float]:
    """(wall seconds, process CPU seconds) of ``fn()``, with the device synchronized before and after."""
    synchronize(device)
    wall, cpu = time.perf_counter(), time.process_time()
    fn()
    synchronize(device)
    return time.perf_counter() - wall, time.process_time() - cpu


def floor_step(model, loss_fn: Callable, batch, optimizer=None) -> Callable[[], None]:
    """One step of the floor: ``loss_fn(model, batch)``, zeroed grads, backward (and ``optimizer.step()``
    if given), eager, nothing else."""
    def step():
        loss = loss_fn(model, batch)
        model.zero_grad(set_to_none=True)
        loss.backward()
        if optimizer is not None:
            optimizer.step()
    return step


def time_steps(step: Callable[[], None], steps: int, warmup: int = 3, device="cpu") -> tuple[float, float]:
    """(wall, CPU) seconds of ``steps`` calls of ``step`` after ``warmup`` untimed ones."""
    for _ in range(warmup):
        step()
    return timed(lambda: [step() for _ in range(steps)], device)


def step_row(workload: str, variant: str, steps: int, times, floor: dict | None = None, **figures) -> dict:
    """A row of ``rows`` from ``times``, one (wall, CPU) seconds pair per repeat of ``steps`` steps: the
    medians as wall seconds, steps/s, ms/step and CPU ms/step, the repeats themselves, and (given the
    floor's row) ms/step over the floor's, in wall and in CPU time."""
    times = [times] if isinstance(times[0], (int, float)) else list(times)
    wall = float(pd.Series([t[0] for t in times]).median())
    cpu = float(pd.Series([t[1] for t in times]).median())
    row = {"workload": workload, "variant": variant, "steps": int(steps), "wall_s": round(wall, 4),
           "steps_per_s": round(steps / wall, 3), "ms_per_step": round(1000 * wall / steps, 4),
           "cpu_ms_per_step": round(1000 * cpu / steps, 4), "runs_wall_s": [round(t[0], 4) for t in times],
           "runs_cpu_s": [round(t[1], 4) for t in times]}
    if floor is not None:
        row["x_floor"] = round(row["ms_per_step"] / floor["ms_per_step"], 4)
        row["x_floor_cpu"] = round(row["cpu_ms_per_step"] / floor["cpu_ms_per_step"], 4)
    row.update(figures)
    return row


def time_ratios(pairs: dict, device="cpu") -> dict:
    """``{name: (row a, row b)}`` -> ``{"name (wall)": a/b in ms per step, "name (CPU time)": the same in CPU
    time}``; CPU-time ratios only on the CPU (a GPU's host CPU time measures nothing useful)."""
    import torch
    out = {}
    for name, (a, b) in pairs.items():
        out[f"{name} (wall)"] = a["ms_per_step"] / b["ms_per_step"]
        if torch.device(device).type == "cpu":
            out[f"{name} (CPU time)"] = a["cpu_ms_per_step"] / b["cpu_ms_per_step"]
    return out


# ---- records -----------------------------------------------------------------------------------------

def _jsonable(value):
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if hasattr(value, "item") and callable(value.item):  # numpy / torch scalars
        return _jsonable(value.item())
    return value


def write_benchmark(name: str, rows: list[dict], ratios: dict, threads: int, /, device="cpu", folder=None,
                    merge: bool = False, **extra) -> Path:
    """Write ``<folder>/<name>.json`` atomically (folder: ``results/benchmarks``) and return its path.

    rows: ``[{"workload", "variant", <measured figures>}]``; ratios: ``{name: value}``; threads: torch's
    intra-op threads; device: a torch device (its name is recorded: "cpu" or the CUDA device's name);
    extra: anything else (the benchmark's arguments, the load average) under ``"args"``; the first four
    are positional-only, so ``extra`` may hold an argument called ``threads`` too.
    merge: keep what an earlier record of this name measured on *other* devices (rows carry a ``device``
    field; ratios of other names stay), so one file holds a benchmark's CPU and GPU figures. Its
    ``device`` then lists every device, and ``args`` is keyed by device.
    """
    for row in rows:
        missing = {"workload", "variant"} - set(row)
        if missing:
            raise ValueError(f"benchmark row {row} lacks {sorted(missing)}")
    record = {"benchmark": name, "machine": machine(), "device": device_name(device), "threads": int(threads),
              "date": datetime.now(timezone.utc).isoformat(timespec="seconds"), "commit": git_commit(),
              "rows": _jsonable(list(rows)), "ratios": {str(k): _jsonable(float(v)) for k, v in ratios.items()}}
    if extra:
        record["args"] = _jsonable(extra)
    path = Path(BENCH_DIR if folder is None else folder) / f"{name}.json"
    if merge:
        here = record["device"]
        record["rows"] = [{**row, "device": here} for row in record["rows"]]
        record["args"] = {here: record.get("args", {})}
        old = json.loads(path.read_text()) if path.exists() else {}
        record["rows"] = [row for row in old.get("rows", []) if row.get("device") != here] + record["rows"]
        record["ratios"] = {**old.get("ratios", {}), **record["ratios"]}
        record["args"] = {**old.get("args", {}), **record["args"]}
        record["device"] = " + ".join(dict.fromkeys(row["device"] for row in record["rows"]))
    write_json(path, record)
    return path


def load_benchmarks(folder=None) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """(runs, rows, ratios) of every ``*.json`` in ``folder`` (default ``results/benchmarks``), by name.

    runs: one row per file (benchmark, machine, device, threads, date, commit, args, file), indexed by
    benchmark; rows: every row of every file with its ``benchmark``; ratios: ``benchmark | ratio | value``.
    """
    folder = Path(BENCH_DIR if folder is None else folder)
    runs, rows, ratios = [], [], []
    for path in sorted(folder.glob("*.json")):
        record = json.loads(path.read_text())
        name = record["benchmark"]
        runs.append({**{k: record.get(k) for k in RUN_COLUMNS[:-2]}, "args": record.get("args", {}),
                     "file": path.name})
        rows += [{"benchmark": name, **row} for row in record.get("rows", [])]
        ratios += [{"benchmark": name, "ratio": k, "value": v} for k, v in record.get("ratios", {}).items()]
    return (pd.DataFrame(runs, columns=RUN_COLUMNS).set_index("benchmark", drop=False),
            pd.DataFrame(rows, columns=None if rows else ["benchmark", "workload", "variant"]),
            pd.DataFrame(ratios, columns=["benchmark", "ratio", "value"]))


# ---- the Performance page ----------------------------------------------------------------------------

SHOWN = {"steps": "steps", "wall_s": "wall s", "steps_per_s": "steps/s", "ms_per_step": "ms/step",
         "x_floor": "× floor", "cpu_ms_per_step": "CPU ms/step", "x_floor_cpu": "× floor (CPU time)",
         "repeats": "repeats", "cpu_spread": "CPU spread (range / median)",
         "llc_mean": "LLC mean", "llc_std": "LLC std (chains)"}


def title(name: str) -> str:
    base, _, device = name.partition("-")
    return TITLES.get(base, base) + (f" ({device})" if device else "")


def heading(runs: pd.DataFrame, name: str):
    """Markdown: the benchmark's title, its machine / device / threads / date / commit line, and for each
    device it ran on (a merged record is keyed by device) its load, whole-run time, arguments and note."""
    from IPython.display import Markdown
    run = runs.loc[name]
    args = dict(run["args"] or {})
    by_device = args if args and all(isinstance(v, dict) for v in args.values()) else {"": args}
    line = (f"**Machine** `{run['machine']}` · **device** {run['device']} · **threads** {run['threads']} · "
            f"**date** {str(run['date'])[:16].replace('T', ' ')} UTC · **commit** `{run['commit']}`")
    parts = [f"### {title(name)}", line]
    for device, device_args in by_device.items():
        device_args = {k: v for k, v in device_args.items() if v is not None}
        load = [device_args.pop(k, None) for k in ("loadavg_start", "loadavg_end")]
        torch_version, note = device_args.pop("torch", None), device_args.pop("note", "")
        total = device_args.pop("total_wall_s", None)
        facts = []
        if torch_version:
            facts.append(f"**torch** {torch_version}")
        if any(v is not None for v in load):
            shown = [", ".join(f"{x:.2f}" for x in v) if v is not None else "–" for v in load]
            facts.append(f"**load average** (1, 5, 15 min) {shown[0]} at the start, {shown[1]} at the end")
        if total is not None:
            facts.append(f"**whole run** {total:.0f} s")
        shown_args = ", ".join(f"`{k}={v}`" for k, v in device_args.items())
        where = f" on {device}" if device else ""
        parts.append(f"**Run{where}:** " + " · ".join(facts + [f"**arguments** {shown_args}"])
                     + (f"\n\n*{note}*" if note else ""))
    return Markdown("\n\n".join(parts))


def table(rows: pd.DataFrame, name: str) -> pd.DataFrame:
    """The rows of one benchmark: workload and variant, then its measured figures in the order of ``SHOWN``
    (then any others; empty columns dropped)."""
    shown = rows[rows["benchmark"] == name]
    if "runs_cpu_s" in shown:  # how much the repeats of a row disagree: ratios below this are noise
        runs = shown["runs_cpu_s"].map(lambda r: pd.Series(r if isinstance(r, list) else [], dtype=float))
        shown = shown.assign(repeats=runs.map(len).where(lambda n: n > 0), cpu_spread=runs.map(  # an estimate: none
            lambda r: (r.max() - r.min()) / r.median() if len(r) > 1 else float("nan")))
    shown = shown.drop(columns=["benchmark", "runs_wall_s", "runs_cpu_s"], errors="ignore").dropna(axis=1, how="all")
    counts = [c for c in ("steps", "runs", "repeats") if c in shown]  # whole numbers, shown as such beside missing ones
    shown = shown.astype({c: "Int64" for c in counts})
    order = ["workload", "variant", *[c for c in SHOWN if c in shown],
             *[c for c in shown if c not in SHOWN and c not in ("workload", "variant")]]
    return shown[order].rename(columns=SHOWN).set_index(["workload", "variant"])


CLOCKS = {" (wall)": "wall time", " (CPU time)": "CPU time"}


def is_throughput(name: str) -> bool:
    """Whether a recorded ratio is a throughput, A's steps per second ÷ B's: named ``a_vs_b`` (``benchmarks/llc_bench.py``
    and ``train_bench.py`` write them so)."""
    return "_vs_" in name.partition(" ")[0]


def as_time_ratio(name: str, value: float) -> float:
    """A recorded ratio in the page's one direction, A's time per step ÷ B's (above 1: A is slower). Ratios named
    ``a_vs_b`` were recorded as throughputs (A's steps per second ÷ B's, as ``benchmarks/llc_bench.py`` and
    ``train_bench.py`` write them), so they are turned over; ``a / b`` ratios are times already."""
    return 1 / value if is_throughput(name) else value


def ratio_table(ratios: pd.DataFrame) -> pd.DataFrame:
    """All ratios, by benchmark, each as A's time ÷ B's (``as_time_ratio``), with one column per clock (a ratio
    named "... (wall)" or "... (CPU time)"); the values that are no ratio (a share; seconds, shown as hours) in their
    own column."""
    shown = ratios.assign(benchmark=ratios["benchmark"].map(title), clock="value")
    shown["value"] = [as_time_ratio(n, v) / (3600 if n.endswith("_s") else 1)
                      for n, v in zip(shown["ratio"], shown["value"])]
    shown["ratio"] = shown["ratio"].map(lambda n: plain_name(n[:-2] + "_hours" if n.endswith("_s") else n))
    for suffix, clock in CLOCKS.items():
        hit = shown["ratio"].str.endswith(suffix)
        shown.loc[hit, "clock"] = clock
        shown.loc[hit, "ratio"] = shown.loc[hit, "ratio"].str[:-len(suffix)]
    shown.loc[(shown["clock"] == "value") & ratios["ratio"].map(is_throughput), "clock"] = "wall time"  # unsuffixed
    table = shown.pivot_table(index=["benchmark", "ratio"], columns="clock", values="value", sort=False)
    table.columns.name = None
    return table[[c for c in ["wall time", "CPU time", "value"] if c in table]]


def plain_name(ratio: str) -> str:
    """A recorded ratio's name in words: ``gpt_vmap_vs_devinterp (wall)`` -> "ours (vmapped) on the GPT ÷ devinterp
    v1 (wall)", ``mlp_devinterp2_vs_floor`` -> "devinterp v2 on the MLP ÷ floor", ``train() / floor`` -> "train() ÷
    floor"."""
    if "_vs_" not in ratio:
        return ratio.replace(" / ", " ÷ ") if " / " in ratio else header_words(ratio)
    name, space, clock = ratio.partition(" ")
    return " ÷ ".join(_part_words(part) for part in name.split("_vs_")) + space + clock


# devinterp's estimators as the LLC benchmarks name them: 1.3.2 in llc.json, 2.0.1 in llc_devinterp2.json
DEVINTERP_WORDS = {"devinterp": "devinterp v1", "devinterp2": "devinterp v2"}


def _part_words(part: str) -> str:
    """One side of a recorded ``a_vs_b``: the LLC benchmarks' ``gpt_vmap`` is our estimator, vmapped, on the GPT,
    ``gpt_devinterp2`` devinterp 2.0.1's on the GPT, and ``devinterp`` devinterp 1.3.2's."""
    model, _, variant = part.partition("_")
    if model in ("gpt", "mlp"):
        if variant in DEVINTERP_WORDS:
            return f"{DEVINTERP_WORDS[variant]} on the {model.upper()}"
        return f"ours ({' '.join(HEADER_WORDS.get(w, w) for w in variant.split('_')) or 'sequential'}) on the {model.upper()}"
    return DEVINTERP_WORDS.get(part) or header_words(part)


def plot_vs_floor(rows: pd.DataFrame):
    """One panel per benchmark: each variant's time per step as a multiple of its floor's, in wall time and
    (on the CPU) in CPU time, with the floor at 1."""
    import matplotlib.pyplot as plt
    import numpy as np

    shown = rows.dropna(subset=["x_floor"]) if "x_floor" in rows else rows.iloc[:0]
    names = list(dict.fromkeys(zip(shown["benchmark"], shown["workload"])))
    sizes = [int(((shown["benchmark"] == n) & (shown["workload"] == w)).sum()) for n, w in names] or [1]
    fig, axes = plt.subplots(len(sizes), 1, squeeze=False, height_ratios=sizes,
                             figsize=(PAGE_WIDTH_IN, 1.0 + 0.55 * sum(sizes) + 0.7 * len(sizes)))
    clocks = [("x_floor", "wall time", "C0"), ("x_floor_cpu", "CPU time", "C1")]
    for ax, (name, workload) in zip(axes[:, 0], names):
        part = shown[(shown["benchmark"] == name) & (shown["workload"] == workload)].reset_index(drop=True)
        present = [c for c in clocks if c[0] in part and part[c[0]].notna().any()]
        height = 0.8 / len(present)
        y = np.arange(len(part))
        for i, (column, label, color) in enumerate(present):
            offsets = y - 0.4 + height * (i + 0.5)
            ax.barh(offsets, part[column], height=height, color=color, label=label)
            for yy, x in zip(offsets, part[column]):
                ax.text(x, yy, f" {x:.2f}×", va="center", fontsize=MIN_FONT_PT)
        ax.axvline(1.0, color="k", lw=1, ls="--")
        ax.set_yticks(y, [textwrap.fill(v, 30, break_long_words=False) for v in part["variant"]])
        ax.set_xlim(0, max(part[c[0]].max() for c in present) * 1.3)
        ax.invert_yaxis()
        ax.set_title(textwrap.fill(f"{title(name)}: {workload}", 80), loc="left", fontsize=MIN_FONT_PT + 1)
    if names:
        handles, labels = axes[0, 0].get_legend_handles_labels()
        fig.legend(handles, labels, loc="outside upper right", ncols=len(labels))
    axes[-1, 0].set_xlabel("time per step / the floor's time per step (floor = 1, dashed)")
    return fig


TIMINGS = REPO_ROOT / "book" / "figures" / "_timings.json"


def execution_status(path=None) -> pd.DataFrame:
    """Every page's last run in a book build (``scripts/run_notebooks.py`` records them, and runs this page after
    the others): whether it ran, its preset, its wall time and when it finished. Empty before any build."""
    path = Path(TIMINGS if path is None else path)
    timings = json.loads(path.read_text()) if path.exists() else {}
    table = pd.DataFrame([{"page": name, "status": "ran" if t["ok"] else "failed", "preset": t["preset"],
                           "run time (s)": round(t["wall_s"]), "finished (UTC)": t["date"][:16].replace("T", " ")}
                          for name, t in sorted(timings.items())],
                         columns=["page", "status", "preset", "run time (s)", "finished (UTC)"])
    return table.set_index("page")


# ---- our λ̂ against devinterp's, over many seeds (benchmarks/llc_agreement.py) -----------------------------

AGREEMENT_PATH = BENCH_DIR / "llc_agreement.csv"
AGREEMENT_COLUMNS = ["workload", "estimator", "seed", "chains", "draws", "llc_mean", "llc_std"]


def estimator_agreement(path=None) -> pd.DataFrame:
    """Per workload, ours against devinterp over the seeds of ``llc_agreement.csv``: each estimator's mean λ̂
    over seeds with its standard error, their difference (ours − devinterp) with its standard error (the
    seeds are independent draws, not pairs), and whether the difference is within 2 of those. Empty when the
    file is absent."""
    path = Path(AGREEMENT_PATH if path is None else path)
    columns = ["seeds", "chains × draws", "ours", "ours SE", "devinterp", "devinterp SE", "difference",
               "difference SE", "within 2 SE"]
    if not path.exists():
        return pd.DataFrame(columns=columns).rename_axis("workload")
    runs = pd.read_csv(path)
    table = []
    for workload, rows in runs.groupby("workload", sort=False):
        ours = rows.loc[rows["estimator"] == "ours", "llc_mean"]
        theirs = rows.loc[rows["estimator"] != "ours", "llc_mean"]
        if len(ours) < 2 or len(theirs) < 2:
            raise ValueError(f"{path}: workload {workload!r} needs at least 2 seeds of each estimator, "
                             f"has {len(ours)} of ours and {len(theirs)} of devinterp's")
        diff, diff_se = ours.mean() - theirs.mean(), math.hypot(ours.sem(), theirs.sem())
        table.append({"workload": workload.upper(), "seeds": len(ours),
                      "chains × draws": f"{rows['chains'].iloc[0]} × {rows['draws'].iloc[0]}",
                      "ours": ours.mean(), "ours SE": ours.sem(), "devinterp": theirs.mean(),
                      "devinterp SE": theirs.sem(), "difference": diff, "difference SE": diff_se,
                      "within 2 SE": "yes" if abs(diff) <= 2 * diff_se else "no"})
    return pd.DataFrame(table, columns=["workload", *columns]).set_index("workload")
