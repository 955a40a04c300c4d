"""Training-loop throughput with and without metrics, against the floor, side by side in one process.

Runs the same config with ``eval_every=10`` (all chapter metrics: a forward with internals, cached
greedy generation, cosine, APM on the eval batch) and with evaluation only at the start and the end,
and times two floors on the same model and batch size: a plain eager forward+backward, and a
forward+backward+Adam step (what a training step cannot go below). The four are alternated
``--repeats`` times and each reported as the median. Writes ``results/benchmarks/train_bench-<device>.json``
(``plateau_lib.benchmarks``), shown on the book's Performance page.

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/train_bench.py [--preset cpu|paper] [--steps 200] [--repeats 3]
"""
import argparse
import time

import torch

from plateau_lib import benchmarks as B
from plateau_lib import metrics as M
from plateau_lib import presets
from plateau_lib.train import build_model, train
from plateau_lib.utils import cpu_threads, resolve_device


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--preset", default="cpu", choices=presets.PRESETS)
    ap.add_argument("--steps", type=int, default=200, help="training steps per run (and floor steps per repeat)")
    ap.add_argument("--eval-every", type=int, default=10)
    ap.add_argument("--repeats", type=int, default=3, help="alternations of the four variants; medians reported")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--out", default=None, help="folder for the JSON (default results/benchmarks)")
    ap.add_argument("--note", default="", help="a line kept with the run's arguments (e.g. why it was cut short)")
    args = ap.parse_args()
    threads = cpu_threads(args.threads)
    load_start = B.loadavg()
    t_start = time.perf_counter()
    base = presets.mws_config(args.preset, steps=args.steps)
    device = resolve_device(base.device)
    variants = {"train(), evaluation at start and end only": base.replace(eval_every=args.steps),
                f"train(), all metrics every {args.eval_every} steps": base.replace(eval_every=args.eval_every)}

    model = build_model(base, device)
    batch = base.make_task().sample(base.batch_size, torch.Generator(device=device).manual_seed(0))
    loss_fn = lambda m, seqs: M.loss_all(m(seqs[:, :-1]), seqs)  # noqa: E731
    adam = torch.optim.Adam(model.parameters(), lr=base.lr)
    floors = {"floor: forward+backward": B.floor_step(model, loss_fn, batch),
              "floor: forward+backward+Adam": B.floor_step(model, loss_fn, batch, adam)}

    runs = {**{name: (lambda step=step: B.time_steps(step, args.steps, device=device)) for name, step in floors.items()},
            **{name: (lambda cfg=cfg: B.timed(lambda: train(cfg, progress=False), device))
               for name, cfg in variants.items()}}
    times = {k: [] for k in runs}
    for repeat in range(args.repeats):  # alternate the four, starting each repeat with the next one
        names = list(runs)[repeat % len(runs):] + list(runs)[:repeat % len(runs)]
        for name in names:
            times[name].append(runs[name]())

    workload = (f"MWS, {args.preset} preset: d_model {base.d_model}, batch {base.batch_size}, {args.steps} steps, "
                f"eval batch {base.eval_batch}")
    floor = B.step_row(workload, "floor: forward+backward", args.steps, times["floor: forward+backward"])
    rows = {name: B.step_row(workload, name, args.steps, ts, floor) for name, ts in times.items()}
    fb_row, adam_row, without, with_m = rows.values()
    ratios = B.time_ratios({"with metrics / without metrics": (with_m, without),
                            "without metrics / floor fwd+bwd+Adam": (without, adam_row),
                            "with metrics / floor fwd+bwd+Adam": (with_m, adam_row),
                            "floor fwd+bwd+Adam / floor fwd+bwd": (adam_row, fb_row)}, device)
    for clock in ("wall", "CPU time"):
        if f"with metrics / without metrics ({clock})" in ratios:
            ratios[f"metrics' share of the run, every {args.eval_every} steps ({clock})"] = \
                1 - 1 / ratios[f"with metrics / without metrics ({clock})"]
    rows = list(rows.values())

    print(f"device {device}, threads {threads}, {workload}")
    for row in rows:
        print(f"{row['variant']:46s} {row['steps_per_s']:7.2f} steps/s {row['ms_per_step']:8.2f} ms/step "
              f"(x floor {row['x_floor']:5.2f}), CPU {row['cpu_ms_per_step']:8.2f} ms/step "
              f"(x floor {row['x_floor_cpu']:5.2f}), wall per run {row['runs_wall_s']}")
    for k, v in ratios.items():
        print(f"{k}: {v:.3f}")
    path = B.write_benchmark(f"train_bench-{device.type}", rows, ratios, threads, device=device, folder=args.out,
                             **vars(args), torch=torch.__version__, loadavg_start=load_start,
                             loadavg_end=B.loadavg(), total_wall_s=round(time.perf_counter() - t_start, 1))
    print(f"wrote {path} after {time.perf_counter() - t_start:.0f} s")


if __name__ == "__main__":
    main()
