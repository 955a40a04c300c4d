"""What a training run costs: a rough GPU model (for planning a lent GPU's minutes) and one CPU core's measured
step and evaluation times per architecture, recorded in ``results/cpu_costs.json`` and multiplied out."""
from __future__ import annotations

import json
import os
import platform
import time
from pathlib import Path

import torch

from plateau_lib.engine import cache
from plateau_lib.engine.train import train
from plateau_lib.engine.utils import cpu_threads, write_json

# Rough GPU cost model for --list and a lease's plan (an H100, fp32): a step costs the larger of a launch-bound
# floor and the model FLOPs (6 x parameters x tokens) at an effective 30 TFLOP/s a model (measured: Carroll et al.'s
# 2.64M-parameter model, 8,192 tokens a step, 12 stacked at 52 ms a step from a CUDA graph on an H100,
# results/benchmarks/gpu.json, 2026-11-26); an evaluation (teacher-forced pass and greedy generation) about 40
# launch-bound steps. Stacking S runs divides the launch-bound part by about S.
LAUNCH_FLOOR_S, EFFECTIVE_FLOPS, EVAL_STEPS = 4e-3, 30e12, 40


def parameters(cfg) -> int:
    """How many parameters ``cfg``'s model has."""
    return sum(p.numel() for p in cfg.make_task().build_model(cfg).parameters())


def estimate_gpu_s(cfg, stacked: int = 1) -> float:
    """Rough seconds one run of ``cfg`` takes on one H100 (the cost model above), its share when ``stacked`` runs
    of its architecture advance together."""
    model = cfg.make_task().build_model(cfg)
    params = sum(p.numel() for p in model.parameters())
    tokens = cfg.batch_size * getattr(model.cfg, "block_size", 2 * getattr(model.cfg, "K", 1))
    step = max(LAUNCH_FLOOR_S / stacked, 6 * params * tokens / EFFECTIVE_FLOPS)
    evals = cfg.steps // cfg.eval_every + 2
    return cfg.steps * step + evals * EVAL_STEPS * LAUNCH_FLOOR_S / stacked


def resume_mib(cfg) -> float:
    """The size of a run's resume state in MiB: its weights and Adam's two moments, float32 (evaluations aside)."""
    return 3 * 4 * parameters(cfg) / 2**20


CPU_RECORD = cache.DEFAULT.committed / "cpu_costs.json"  # measured seconds per step and per evaluation
COST_FIELDS = ("task", "optimizer", "batch_size", "eval_batch")


def architecture(cfg) -> str:
    """What sets a run's cost per step on a CPU: the model it builds (which holds the task's sequence length and
    vocabulary), the task, the optimizer and the batch sizes; not its length, seed, or the task's other settings
    (e.g. the number M of pretraining tasks, which changes only the evaluation's baselines a little)."""
    d = cfg.to_dict()
    return json.dumps({**{k: d[k] for k in COST_FIELDS}, "model": repr(cfg.model_config())}, sort_keys=True)


def measure_cpu(cfg, steps: int = 8, least_s: float = 1.0, extra_evals: int = 4, repeats: int = 2) -> dict:
    """Seconds per training step and per evaluation of ``cfg``'s architecture on one CPU thread, from short runs
    evaluated at their start and end: ``steps`` steps, the same with ``extra_evals`` more evaluations, and
    2 x ``steps`` steps, each the fastest of ``repeats`` (a shared machine only ever adds time). Differences
    cancel the fixed cost of building and starting a run; while the extra steps take less than ``least_s``
    (noise), ``steps`` grows eightfold."""

    def timed(n, extra=()):
        probe = cfg.replace(steps=n, eval_every=n, eval_steps=extra, checkpoint_steps=(), device="cpu",
                            copy_groups=(), schedule="constant", warmup_steps=0)
        best = float("inf")
        for _ in range(repeats):
            t0 = time.perf_counter()
            train(probe, progress=False)
            best = min(best, time.perf_counter() - t0)
        return best
    steps = max(steps, extra_evals + 1)
    while True:
        base, doubled = timed(steps), timed(2 * steps)
        if doubled - base >= least_s or steps >= 4096:
            break
        steps *= 8
    evals = timed(steps, tuple(range(1, extra_evals + 1)))
    return {"step_s": round(max(doubled - base, 0.0) / steps, 5),
            "eval_s": round(max(evals - base, 0.0) / extra_evals, 5)}


def cpu_costs(configs, measure: bool = True, record: Path | None = None) -> dict:
    """``{architecture: {"step_s", "eval_s"}}`` for ``configs``, read from ``record`` (``CPU_RECORD``); with
    ``measure`` the architectures it lacks are timed here (one thread) and added to it."""
    record = CPU_RECORD if record is None else record
    known = json.loads(record.read_text())["architectures"] if record.exists() else {}
    missing = {architecture(c): c for c in configs if architecture(c) not in known}
    for arch, cfg in missing.items() if measure else ():
        print(f"measuring one CPU core's step and evaluation of {cfg.task} d_model {cfg.d_model} "
              f"({len(known)} architectures recorded)...", flush=True)
        known[arch] = measure_cpu(cfg)
        write_json(record, {"architectures": known, "machine": platform.processor() or platform.machine(),
                            "threads": cpu_threads(), "torch": torch.__version__, "date": time.strftime("%Y-%m-%d"),
                            "load_at_end": [round(x, 2) for x in os.getloadavg()],
                            "note": "python -m plateau_lib paper --list measures what is missing"})
    return known


def estimate_cpu_s(cfg, costs: dict) -> float | None:
    """Seconds one run of ``cfg`` takes on one CPU core (its architecture's measured step and evaluation times
    multiplied out), or None when the architecture was not measured."""
    cost = costs.get(architecture(cfg))
    if cost is None:
        return None
    evals = cfg.steps // cfg.eval_every + len(set(cfg.eval_steps)) + 2
    return cfg.steps * cost["step_s"] + evals * cost["eval_s"]
