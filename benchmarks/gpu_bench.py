"""The training engine on a GPU against the GPU's own floor: matrix-product peaks, and the stacked training step of
the two ICL models the GPU is lent for, in one process, side by side.

The matrix-product peaks (an n x n x n product in bfloat16 and in float32, TF32 off, in TFLOP/s) are kept with
the record's arguments (``peaks_tflops``). Rows (each the median of ``--repeats`` alternated repeats; the time of
a training variant is the difference between ``train_many`` over ``3n`` and over ``n`` steps, divided by ``2n``,
so start-up, evaluations and the graph's capture cancel):
- ``Hoogland L2H4, 5 seeds stacked`` (51,717 parameters, batch 256, 16 tokens) and ``Carroll paper model, 12 M
  stacked`` (2,641,417 parameters, batch 256, 32 tokens): the plain forward+backward of the stacked model (vmap
  of the loss's gradient, no optimizer: the floor), ``train_many`` eager, ``train_many(cuda_graphs=True)``, and
  for Carroll's model float32 products computed through bfloat16 (``torch.set_float32_matmul_precision
  ("medium")``). Each row gives ms per stacked step, ``x_floor``, and TFLOP/s at 6 x parameters x tokens per
  run, against the measured peaks (``pct_bf16_peak``, ``pct_fp32_peak``).
- ``checks``: the largest parameter difference between ``cuda_graphs`` and eager training after ``n`` steps, and
  between a "medium" float32 product and the same product with operands rounded to bfloat16
  (``engine.precision``), relative to the product's scale.

Writes ``results/benchmarks/gpu.json`` (merged by device). On a CPU it runs at tiny sizes (the tests do).

    python benchmarks/gpu_bench.py                        # a lent GPU (about 2 minutes)
    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/gpu_bench.py --tiny
"""
import argparse
import time

import torch
from torch.func import grad, vmap

from plateau_lib.book import benchmarks as B
from plateau_lib.engine.precision import to_bf16
from plateau_lib.engine.setup import build_model
from plateau_lib.engine.stacked import Bound
from plateau_lib.engine.train import train_many
from plateau_lib.engine.utils import cpu_threads, resolve_device
from plateau_lib.icl.presets import DIVERSITY_MS, DIVERSITY_PAPER, ICL_PAPER


def matmul_peak(n: int, dtype, device, repeats: int = 10) -> float:
    """TFLOP/s of an n x n x n product (mean of ``repeats`` after three warm-ups)."""
    a, b = (torch.randn(n, n, device=device, dtype=dtype) for _ in range(2))
    for _ in range(3):
        a @ b
    wall, _ = B.timed(lambda: [a @ b for _ in range(repeats)], device)
    return 2 * n ** 3 * repeats / wall / 1e12


def floor_seconds(configs, steps: int, device) -> float:
    """Seconds per step of the plain stacked forward+backward (gradients by vmap, no optimizer)."""
    model, task = build_model(configs[0], device), configs[0].make_task()
    params = {n: torch.stack([p.detach()] * len(configs)) for n, p in model.named_parameters()}
    gens = [torch.Generator(device=device).manual_seed(c.seed) for c in configs]
    batch = tuple(torch.stack(xs) for xs in zip(*[task.sample(c.batch_size, g) for c, g in zip(configs, gens)]))
    loss = lambda p, b: task.loss(Bound(model, p), b)  # noqa: E731  (the training step's own binding)
    step = lambda: vmap(grad(loss))(params, batch)  # noqa: E731
    wall, _ = B.time_steps(step, steps, device=device)
    return wall / steps


def train_seconds(configs, n: int, device, **kwargs) -> float:
    """Seconds per stacked step of ``train_many``: (time of 3n steps - time of n steps) / 2n."""
    def run(steps):
        cfgs = [c.replace(steps=steps, eval_every=steps, eval_steps=(), checkpoint_steps=()) for c in configs]
        return B.timed(lambda: train_many(cfgs, backend="stacked", progress=False, **kwargs), device)[0]
    return (run(3 * n) - run(n)) / (2 * n)


def graph_difference(configs, n: int) -> float:
    """Largest parameter difference after ``n`` steps between ``cuda_graphs`` and eager stacked training."""
    cfgs = [c.replace(steps=n, eval_every=n, eval_steps=(), checkpoint_steps=()) for c in configs]
    eager = train_many(cfgs, backend="stacked", progress=False)
    graphed = train_many(cfgs, backend="stacked", progress=False, cuda_graphs=True)
    return max(float((a.final_state[k] - b.final_state[k]).abs().max()) for a, b in zip(eager, graphed)
               for k in a.final_state)


def medium_vs_rounded(n: int, device) -> float:
    """|medium-precision float32 product - product of bf16-rounded operands| / mean |product|, largest entry."""
    a, b = torch.randn(n, n, device=device), torch.randn(n, n, device=device)
    exact = to_bf16(a) @ to_bf16(b)
    torch.set_float32_matmul_precision("medium")
    try:
        medium = a @ b
    finally:
        torch.set_float32_matmul_precision("highest")
    return float((medium - exact).abs().max() / exact.abs().mean())


def workloads(tiny: bool, device) -> dict:
    """{name: (configs, parameters)} of the two stacked models (tiny: small widths, as a CPU test runs)."""
    hoog = [ICL_PAPER.replace(seed=s, device=str(device)) for s in range(5)]
    carroll = [DIVERSITY_PAPER.replace(task_kwargs={**DIVERSITY_PAPER.task_kwargs, "M": m}, device=str(device))
               for m in DIVERSITY_MS["paper"]]
    if tiny:
        hoog = [c.replace(d_model=16, n_head=2, batch_size=16) for c in hoog[:2]]
        carroll = [c.replace(d_model=16, n_head=2, batch_size=8, eval_batch=16,
                             task_kwargs={**c.task_kwargs, "d_mlp": 16, "n_root": 4}) for c in carroll[:2]]
    out = {}
    for name, cfgs in ((f"Hoogland L2H4, {len(hoog)} seeds stacked", hoog),
                       (f"Carroll paper model, {len(carroll)} M stacked", carroll)):
        params = sum(p.numel() for p in build_model(cfgs[0], "cpu").parameters())
        tokens = cfgs[0].batch_size * 2 * cfgs[0].task_kwargs["K"]
        out[name] = (cfgs, params, 6 * params * tokens * len(cfgs))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tiny", action="store_true", help="small models and products (a CPU test)")
    ap.add_argument("--steps", type=int, default=None,
                    help="n of Hoogland's step timings, a tenth of it Carroll's (default 100 on GPU, 3 tiny)")
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--device", default="auto")
    ap.add_argument("--out", default=None, help="folder for the JSON (default results/benchmarks)")
    args = ap.parse_args()
    threads, device, t_start = cpu_threads(), resolve_device(args.device), time.perf_counter()
    steps = args.steps or (3 if args.tiny else 100)
    size = 256 if args.tiny else 8192
    peaks = {dt: max(matmul_peak(size, getattr(torch, dt), device) for _ in range(args.repeats))
             for dt in ("bfloat16", "float32")}
    rows, ratios, checks = [], {}, {}
    for name, (cfgs, params, flops) in workloads(args.tiny, device).items():
        n = steps if name.startswith("Hoogland") else max(1, steps // 10)
        variants = {"floor: stacked forward+backward": lambda: floor_seconds(cfgs, n, device),
                    "train_many, eager": lambda: train_seconds(cfgs, n, device),
                    "train_many, cuda_graphs": lambda: train_seconds(cfgs, n, device, cuda_graphs=True)}
        if name.startswith("Carroll"):
            def medium():
                torch.set_float32_matmul_precision("medium")
                try:
                    return train_seconds(cfgs, n, device, cuda_graphs=True)
                finally:
                    torch.set_float32_matmul_precision("highest")
            variants["train_many, cuda_graphs, float32 products through bf16 (medium)"] = medium
        times = {v: [] for v in variants}
        for repeat in range(args.repeats):
            for v in list(variants)[repeat % 2:] + list(variants)[:repeat % 2]:
                times[v].append(variants[v]())
        floor = None
        for v, ts in times.items():
            s = sorted(ts)[len(ts) // 2]
            row = {"workload": name, "variant": v, "parameters": params, "ms_per_step": round(1000 * s, 4),
                   "runs_wall_s": [round(2 * n * t, 4) for t in ts], "tflops": round(flops / s / 1e12, 3),
                   "pct_bf16_peak": round(100 * flops / s / 1e12 / peaks["bfloat16"], 2),
                   "pct_fp32_peak": round(100 * flops / s / 1e12 / peaks["float32"], 2)}
            floor = floor or row
            row["x_floor"] = round(row["ms_per_step"] / floor["ms_per_step"], 4)
            rows.append(row)
            print(name, "|", v, {k: row[k] for k in ("ms_per_step", "tflops", "pct_bf16_peak", "x_floor")}, flush=True)
            if row is not floor:
                ratios[f"{name}: {v} / floor (wall)"] = row["x_floor"]
        checks[f"{name}: cuda_graphs vs eager, max |Δparam| after {n} steps"] = graph_difference(cfgs, n)
        print(checks, flush=True)
    checks["medium float32 product vs bf16-rounded operands, max |Δ| / mean |product|"] = medium_vs_rounded(size, device)
    print(peaks, checks, flush=True)
    path = B.write_benchmark("gpu", rows, ratios, threads, device=device, folder=args.out, merge=True,
                             peaks_tflops={f"{size}^3 {dt}": round(v, 2) for dt, v in peaks.items()}, checks=checks,
                             steps=steps, repeats=args.repeats, tiny=args.tiny,
                             seconds=round(time.perf_counter() - t_start, 1))
    print(path)


if __name__ == "__main__":
    main()
