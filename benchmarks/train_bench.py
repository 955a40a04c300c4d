"""Training-loop throughput with and without metrics, measured side by side in one process.

Runs the same config with ``eval_every=10`` (all chapter metrics: a forward with internals, cached
greedy generation, cosine, APM on the eval batch) and with evaluation only at the start and the
end, alternating the two ``--repeats`` times, and prints steps/s and the metrics' share of the time
(target: <= 25 % at eval_every=10).

    python benchmarks/train_bench.py [--preset cpu|paper] [--steps 200] [--repeats 3] [--threads 1]
"""
import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from plateau_lib import presets  # noqa: E402
from plateau_lib.train import train  # noqa: E402
from plateau_lib.utils import cpu_threads, resolve_device  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--preset", default="cpu", choices=presets.PRESETS)
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--eval-every", type=int, default=10)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    cpu_threads(args.threads)
    base = presets.mws_config(args.preset, steps=args.steps)
    variants = {"with metrics": base.replace(eval_every=args.eval_every), "without metrics": base.replace(eval_every=args.steps)}
    times = {k: [] for k in variants}
    for _ in range(args.repeats):
        for name, cfg in variants.items():
            t = time.perf_counter()
            train(cfg, progress=False)
            times[name].append(time.perf_counter() - t)
    with_m, without = statistics.median(times["with metrics"]), statistics.median(times["without metrics"])
    print(f"device {resolve_device(base.device)}, threads {args.threads}, preset {args.preset}, "
          f"{args.steps} steps, batch {base.batch_size}, eval batch {base.eval_batch}, d_model {base.d_model}")
    for name, ts in times.items():
        print(f"{name:16s} median {statistics.median(ts):7.2f} s  ({args.steps / statistics.median(ts):6.1f} steps/s)  runs {[round(t, 2) for t in ts]}")
    print(f"metrics every {args.eval_every} steps cost {100 * (with_m - without) / with_m:.1f} % of the run "
          f"(ratio with/without = {with_m / without:.3f}; target <= 25 %)")


if __name__ == "__main__":
    main()
