"""The CPU cost model against a measured run, side by side in one process.

``engine.costs`` plans the paper queue from a measured step and evaluation time per architecture
(``measure_cpu``, multiplied out by ``estimate_cpu_s``). Here, for each workload, the model is measured into a
scratch record and a whole run is timed beside it (the fastest of ``--repeats``, as the measurement takes the
fastest of its runs). ``<workload>: estimate / measured run`` is the ratio the queue relies on (1: exact; the
queue's limits tolerate a factor of two). The floor is a plain eager forward+backward of the same model and batch.

Writes ``results/benchmarks/costs.json`` (merged with other devices' records); the Performance page shows it.

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/costs_bench.py
"""
import argparse
import tempfile
import time
from pathlib import Path

import torch

from plateau_lib.book import benchmarks as B
from plateau_lib.engine import costs
from plateau_lib.engine.runs import TrainConfig
from plateau_lib.engine.setup import build_model
from plateau_lib.engine.train import train
from plateau_lib.engine.utils import cpu_threads
from plateau_lib.plateau import presets

WORKLOADS = {  # a small MWS run with many evaluations, and the cpu preset's Fig. 2 run
    "MWS n=8 p=11, d_model 32, batch 64, 300 steps, eval every 30":
        lambda: TrainConfig(task_kwargs={"n": 8, "p": 11}, d_model=32, steps=300, eval_every=30, batch_size=64,
                            eval_batch=8),
    "MWS, cpu preset (Fig. 2)": lambda: presets.mws_config("cpu"),
}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=3, help="timed runs of each workload; the fastest is compared")
    ap.add_argument("--floor-steps", type=int, default=50)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--out", default=None, help="folder for the JSON (default results/benchmarks)")
    args = ap.parse_args()
    threads = cpu_threads(args.threads)
    load_start, t_start = B.loadavg(), time.perf_counter()
    rows, ratios = [], {}
    with tempfile.TemporaryDirectory() as scratch:
        for workload, make in WORKLOADS.items():
            cfg = make().replace(device="cpu")
            task = cfg.make_task()
            batch = task.sample(cfg.batch_size, torch.Generator().manual_seed(0))
            floor = B.step_row(workload, "floor: forward+backward", args.floor_steps, [B.time_steps(
                B.floor_step(build_model(cfg, "cpu"), task.loss, batch), args.floor_steps)])
            measured = costs.cpu_costs([cfg], record=Path(scratch) / f"{len(rows)}.json")[costs.architecture(cfg)]
            estimate = costs.estimate_cpu_s(cfg, {costs.architecture(cfg): measured})
            runs = [B.timed(lambda: train(cfg, progress=False)) for _ in range(args.repeats)]
            fastest = min(runs)
            timed = {**B.step_row(workload, "whole run, timed (the fastest repeat)", cfg.steps, [fastest], floor),
                     "runs_wall_s": [round(t[0], 4) for t in runs], "runs_cpu_s": [round(t[1], 4) for t in runs]}
            model = {"workload": workload, "variant": "whole run, the cost model's estimate", "steps": cfg.steps,
                     "wall_s": round(estimate, 4), "steps_per_s": round(cfg.steps / estimate, 3),
                     "ms_per_step": round(1000 * estimate / cfg.steps, 4),
                     "x_floor": round(1000 * estimate / cfg.steps / floor["ms_per_step"], 4),
                     "step_s": measured["step_s"], "eval_s": measured["eval_s"]}
            rows += [floor, timed, model]
            ratios[f"{workload}: estimate / measured run"] = estimate / fastest[0]
            print(f"{workload}: estimate {estimate:.2f} s, run {fastest[0]:.2f} s, ratio {estimate / fastest[0]:.2f}")
    path = B.write_benchmark("costs", rows, ratios, threads, folder=args.out, merge=True, **vars(args),
                             torch=torch.__version__, loadavg_start=load_start, loadavg_end=B.loadavg(),
                             total_wall_s=round(time.perf_counter() - t_start, 1))
    print(f"wrote {path} after {time.perf_counter() - t_start:.0f} s")


if __name__ == "__main__":
    main()
