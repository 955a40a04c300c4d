"""The training loop's speed, side by side in one process: the floor, the metrics' cost, and S stacked runs.

Variants, on the ``--preset`` MWS config for ``--steps`` steps, each the median of ``--repeats``
alternated repeats:
- floors on the same model and batch: a plain eager forward+backward, and forward+backward+Adam (what a
  training step cannot go below);
- ``train()`` with evaluation only at the start and the end, and with every chapter metric every
  ``--eval-every`` steps, over the preset's whole run (``--metrics-steps``; the cost of an evaluation
  depends on the phase: a model right under teacher forcing needs no decoding): ``metrics_overhead`` is the
  metrics' share of the run;
- S (``--stack``) runs of different seeds through ``train_many``, ``backend="sequential"`` and
  ``backend="stacked"`` (evaluation at the start and end): ``<device>_stacked_vs_sequential`` is the
  stacked throughput over the sequential one, in run-steps per second (above 1: stacking pays);
- with ``--paper-width`` also the paper's d_model-256 model, stacked vs sequential
  (``gpu_paper_width_stacked_vs_sequential``) and the wall time of one ``paper`` Fig. 2 run.

Writes ``results/benchmarks/train.json`` (``plateau_lib.book.benchmarks``), merged with what other devices
measured, and the Performance page shows it.

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/train_bench.py --steps 100 --repeats 3        # CPU
    python benchmarks/train_bench.py --stack 16 --paper-width                                   # GPU
"""
import argparse
import time

import torch

from plateau_lib.book import benchmarks as B
from plateau_lib.engine import presets as engine_presets
from plateau_lib.engine.setup import build_model
from plateau_lib.engine.train import train, train_many
from plateau_lib.engine.utils import cpu_threads, resolve_device
from plateau_lib.plateau import presets


def stacked_rows(label, base, stack, steps, repeats, device, floor):
    """Rows for S sequential and S stacked runs of ``base`` (seeds 0..S-1), and their throughput ratio."""
    configs = [base.replace(seed=s, steps=steps, eval_every=steps) for s in range(stack)]
    variants = {f"{stack} runs, sequential": "sequential", f"{stack} runs, stacked (train_many)": "stacked"}
    times = {name: [] for name in variants}
    for repeat in range(repeats):
        for name in list(variants)[repeat % 2:] + list(variants)[:repeat % 2]:
            times[name].append(B.timed(lambda: train_many(configs, backend=variants[name], progress=False), device))
    rows = [B.step_row(label, name, steps * stack, ts, floor, runs=stack) for name, ts in times.items()]
    return rows, rows[1]["steps_per_s"] / rows[0]["steps_per_s"]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--preset", default="cpu", choices=engine_presets.PRESETS)
    ap.add_argument("--steps", type=int, default=100, help="training steps per run (and floor steps per repeat)")
    ap.add_argument("--eval-every", type=int, default=10)
    ap.add_argument("--metrics-steps", type=int, default=None, help="steps of the two train() runs (default: the preset's)")
    ap.add_argument("--stack", type=int, default=None, help="runs stacked by train_many (default 4 on CPU, 16 on GPU)")
    ap.add_argument("--paper-width", action="store_true", help="also the d_model-256 paper model, and a Fig. 2 run")
    ap.add_argument("--repeats", type=int, default=3, help="alternations of the variants; medians reported")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--device", default="auto")
    ap.add_argument("--out", default=None, help="folder for the JSON (default results/benchmarks)")
    ap.add_argument("--note", default="", help="a line kept with the run's arguments (e.g. why it was cut short)")
    args = ap.parse_args()
    threads = cpu_threads(args.threads)
    load_start, t_start = B.loadavg(), time.perf_counter()
    device = resolve_device(args.device)
    gpu = device.type == "cuda"
    stack = args.stack or (16 if gpu else 4)
    base = presets.mws_config(args.preset, steps=args.steps, device=str(device))
    workload = (f"MWS, {args.preset} preset: d_model {base.d_model}, batch {base.batch_size}, {args.steps} steps, "
                f"eval batch {base.eval_batch}")

    whole = presets.mws_config(args.preset, device=str(device))
    if args.metrics_steps:
        whole = whole.replace(steps=args.metrics_steps)
    model = build_model(base, device)
    task = base.make_task()
    batch = task.sample(base.batch_size, torch.Generator(device=device).manual_seed(0))
    adam = torch.optim.Adam(model.parameters(), lr=base.lr)
    runs = {"floor: forward+backward": lambda: B.time_steps(B.floor_step(model, task.loss, batch), args.steps,
                                                             device=device),
            "floor: forward+backward+Adam": lambda: B.time_steps(B.floor_step(model, task.loss, batch, adam),
                                                                  args.steps, device=device),
            "train(), evaluation at start and end only": lambda: B.timed(
                lambda: train(whole.replace(eval_every=whole.steps), progress=False), device),
            f"train(), all metrics every {args.eval_every} steps": lambda: B.timed(
                lambda: train(whole.replace(eval_every=args.eval_every), progress=False), device)}
    times = {k: [] for k in runs}
    for repeat in range(args.repeats):  # alternate, starting each repeat with the next variant
        for name in list(runs)[repeat % len(runs):] + list(runs)[:repeat % len(runs)]:
            times[name].append(runs[name]())
    floor = B.step_row(workload, "floor: forward+backward", args.steps, times["floor: forward+backward"])
    rows = [B.step_row(workload if name.startswith("floor") else workload.replace(f"{args.steps} steps", f"{whole.steps} steps"),
                       name, args.steps if name.startswith("floor") else whole.steps, ts, floor)
            for name, ts in times.items()]
    fb_row, adam_row, without, with_m = rows
    prefix = "gpu" if gpu else "cpu"
    ratios = {"metrics_overhead" + ("_gpu" if gpu else ""): 1 - without["ms_per_step"] / with_m["ms_per_step"]}
    ratios.update(B.time_ratios({"without metrics / floor fwd+bwd+Adam": (without, adam_row),
                                 "floor fwd+bwd+Adam / floor fwd+bwd": (adam_row, fb_row)}, device))
    more, ratios[f"{prefix}_stacked_vs_sequential"] = stacked_rows(workload, base, stack, args.steps, args.repeats,
                                                                    device, floor)
    rows += more
    if args.paper_width:
        paper = presets.mws_config("paper", device=str(device))
        wide = f"MWS, paper preset: d_model {paper.d_model}, batch {paper.batch_size}"
        wide_floor_model = build_model(paper, device)
        wide_batch = task.sample(paper.batch_size, torch.Generator(device=device).manual_seed(0))
        wide_floor = B.step_row(wide, "floor: forward+backward", args.steps, [B.time_steps(
            B.floor_step(wide_floor_model, task.loss, wide_batch), args.steps, device=device)])
        more, ratios[f"{prefix}_paper_width_stacked_vs_sequential"] = stacked_rows(
            wide, paper, stack, args.steps, args.repeats, device, wide_floor)
        fig2 = B.timed(lambda: train(paper, progress=False), device)
        rows += [wide_floor, *more, B.step_row(wide, "one paper Fig. 2 run (400 steps, metrics every 10)",
                                               paper.steps, [fig2], wide_floor)]
        ratios[f"{prefix}_paper_fig2_run_wall_s"] = fig2[0]

    print(f"device {device}, threads {threads}")
    for row in rows:
        print(f"{row['workload'][:40]:40s} {row['variant']:46s} {row['steps_per_s']:9.2f} steps/s "
              f"{row['ms_per_step']:8.2f} ms/step (x floor {row.get('x_floor', 1):5.2f})")
    for k, v in ratios.items():
        print(f"{k}: {v:.3f}")
    path = B.write_benchmark("train", rows, ratios, threads, device=device, folder=args.out, merge=True,
                             **{k: v for k, v in vars(args).items() if k != "device"}, torch=torch.__version__, loadavg_start=load_start,
                             loadavg_end=B.loadavg(), total_wall_s=round(time.perf_counter() - t_start, 1))
    print(f"wrote {path} after {time.perf_counter() - t_start:.0f} s")


if __name__ == "__main__":
    main()
