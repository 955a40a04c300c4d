"""Throughput of devinterp 2.0.1's LLC estimator beside ours and the floor, in one process, same work.

devinterp 2.0.1 cannot share ``.venv`` with devinterp 1.3.2 (``benchmarks/llc_bench.py``), so this runs in its own
venv, ``.venv-devinterp2`` (``make venv-devinterp2``), which uses ``.venv``'s torch and plateau_lib. The
workloads are ``llc_bench.py``'s own (imported from it: the GPT and the MLP, trained the same way, on the same
8,192 examples), and so are the SGLD settings: 4 chains x ``--draws`` draws, epsilon 1e-4, gamma 100,
nbeta = 1024 / ln 1024, batch 1024, each chain with its own batches, one thread. Variants, alternated over
``--repeats`` rounds (floor, ours, devinterp2, ...):

- floor: a plain eager forward+backward of the same model on one batch of 1024, as in ``llc_bench.py``.
- ours: ``estimate_llc(..., backend="sequential")``, as in ``llc_bench.py``.
- devinterp2: ``devinterp.slt.llc.llc`` (its documented entry point: sampling, then λ̂ from the stored losses),
  with ``lr`` = epsilon, ``localization`` = gamma, ``n_beta``, ``batch_size``, ``num_chains``, ``num_draws``, no
  burn-in, no observables, ``num_init_loss_batches`` = 8 (the loss at w* on all 8,192 examples, as ours),
  ``match_sampling_input_ids_across_chains=False`` (each chain its own batches, as ours and 1.3.2), its samples
  written to a fresh zarr store per call (2.0.1 always stores them). It samples a Hugging Face ``Dataset`` of
  ``input_ids`` rows with a per-token loss ``loss_fn(model, input_ids) -> (batch, length - 1)``: for the GPT the
  sequences themselves and the per-position cross-entropy (whose mean is our loss); for the MLP each row is an
  example's index twice, ``[i, i]`` (one "position"), and the loss looks the example up and returns its squared
  error (whose mean is our MSE).

Time per chain-step = the call's time / (chains x draws), in wall and process CPU time. Ratios are throughputs,
ours / theirs (> 1: ours is faster): ``gpt_vs_floor`` = floor ms / ours ms, ``gpt_devinterp2_vs_floor`` = floor
ms / devinterp2 ms, ``gpt_vs_devinterp2`` = devinterp2 ms / ours ms, the same for mlp; plain names in wall time,
``(CPU time)`` ones in process CPU time. The rows keep each estimator's λ̂ (mean and spread over chains). Writes
``results/benchmarks/llc_devinterp2.json``, shown on the book's Performance page beside ``llc.json``. Run::

    make venv-devinterp2
    OMP_NUM_THREADS=1 .venv-devinterp2/bin/python benchmarks/llc_devinterp2_bench.py --draws 30   # the committed run
    OMP_NUM_THREADS=1 .venv-devinterp2/bin/python benchmarks/llc_devinterp2_bench.py --quick      # a smoke run
"""
from __future__ import annotations

import argparse
import copy
import math
import os
import sys
import tempfile
import time
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

import torch
import torch.nn.functional as F

from llc_bench import gpt_workload, mlp_workload, N_DATA
from plateau_lib.book import benchmarks as B
from plateau_lib.engine.utils import cpu_threads
from plateau_lib.llc import SGLDConfig, estimate_llc

DEVINTERP2 = "2.0.1"
MAKE_TARGET = "make venv-devinterp2"


def require_devinterp2() -> str:
    """devinterp's version here; a SystemExit naming the make target unless it is 2.0.1."""
    try:
        found = version("devinterp")
    except PackageNotFoundError:
        found = "none"
    if found != DEVINTERP2:
        raise SystemExit(f"benchmarks/llc_devinterp2_bench.py needs devinterp {DEVINTERP2}, found {found} in "
                         f"{sys.prefix}: build .venv-devinterp2 with `{MAKE_TARGET}` and run this script with "
                         f".venv-devinterp2/bin/python")
    return found


def per_token_loss(name: str, data):
    """(devinterp 2.0.1's rows of ``input_ids``, its per-token loss) for a workload's data (see the docstring)."""
    if name == "gpt":
        def loss(model, seqs):
            logits = model(seqs[:, :-1])
            return F.cross_entropy(logits.transpose(1, 2), seqs[:, 1:], reduction="none")
        return data.cpu(), loss
    x, y = data

    def loss(model, rows):
        index = rows[:, 0]
        return (model(x[index]) - y[index]).pow(2).mean(dim=1, keepdim=True)
    return torch.arange(N_DATA).repeat(2, 1).T.contiguous(), loss


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--chains", type=int, default=4)
    ap.add_argument("--draws", type=int, default=30)
    ap.add_argument("--batch", type=int, default=1024)
    ap.add_argument("--threads", type=int, default=1, help="intra-op threads, the same for every variant")
    ap.add_argument("--repeats", type=int, default=2, help="rounds of floor / ours / devinterp2, alternated")
    ap.add_argument("--floor-steps", type=int, default=20, help="forward+backward steps per floor timing")
    ap.add_argument("--workloads", nargs="+", default=["gpt", "mlp"], choices=["gpt", "mlp"])
    ap.add_argument("--quick", action="store_true", help="5 draws, 1 round, 5 floor steps (smoke run)")
    ap.add_argument("--out", default=None, help="folder for the JSON (default results/benchmarks)")
    ap.add_argument("--note", default="", help="a line kept with the run's arguments")
    args = ap.parse_args()
    if args.quick:
        args.draws, args.repeats, args.floor_steps = 5, 1, 5
    devinterp_version = require_devinterp2()
    os.environ["TQDM_DISABLE"] = "1"  # 2.0.1's chains always draw a progress bar (1.3.2 ran with verbose=False)
    from datasets import Dataset
    from devinterp.slt.llc import llc

    threads = cpu_threads(args.threads)
    load_start = B.loadavg()
    t_start = time.perf_counter()
    device = "cuda" if torch.cuda.is_available() else "cpu"
    print(f"torch {torch.__version__}, devinterp {devinterp_version}, device {B.device_name(device)}, threads "
          f"{threads}, {B.machine()}, loadavg {load_start}")
    nbeta = args.batch / math.log(args.batch)
    sgld = SGLDConfig(epsilon=1e-4, gamma=100.0, nbeta=nbeta, num_chains=args.chains, num_draws=args.draws,
                      batch_size=args.batch, seed=0)
    work = args.chains * args.draws
    rows, ratios = [], {}
    for name in args.workloads:
        model, data, loss_fn, _, _ = (gpt_workload if name == "gpt" else mlp_workload)(device)
        input_ids, token_loss = per_token_loss(name, data)
        dataset = Dataset.from_dict({"input_ids": input_ids.numpy()}).with_format("torch")
        n_params = sum(p.numel() for p in model.parameters())
        workload = f"SGLD LLC of the {name.upper()} ({n_params:,} parameters), batch {args.batch}, " \
                   f"{args.chains} chains x {args.draws} draws"
        print(f"\n{workload}")

        def ours():
            out = {}
            times = B.timed(lambda: out.update(r=estimate_llc(model, loss_fn, data, sgld, device=device, warn=False,
                                                              backend="sequential")), device)
            return times, out["r"]

        def theirs():
            out = {}
            with tempfile.TemporaryDirectory() as folder:
                times = B.timed(lambda: out.update(r=llc(
                    model, dataset, {}, lr=sgld.epsilon, n_beta=nbeta, loss_fn=token_loss, localization=sgld.gamma,
                    num_chains=args.chains, num_draws=args.draws, batch_size=args.batch, num_burnin_steps=0,
                    num_init_loss_batches=N_DATA // args.batch, match_sampling_input_ids_across_chains=False,
                    init_seed=sgld.seed, device=device, output_path=Path(folder) / "samples.zarr").load()), device)
            return times, out["r"]

        batch = data[:args.batch] if isinstance(data, torch.Tensor) else tuple(t[:args.batch] for t in data)
        floor = B.floor_step(copy.deepcopy(model), loss_fn, batch)
        times = {"floor": [], "ours": [], "devinterp2": []}
        for _ in range(args.repeats):
            times["floor"].append(B.time_steps(floor, args.floor_steps, device=device))
            t, ours_result = ours()
            times["ours"].append(t)
            t, their_result = theirs()
            times["devinterp2"].append(t)
            print(f"  round: floor {1000 * times['floor'][-1][0] / args.floor_steps:.1f} ms, ours "
                  f"{1000 * times['ours'][-1][0] / work:.1f} ms, devinterp2 "
                  f"{1000 * times['devinterp2'][-1][0] / work:.1f} ms per chain-step (wall); λ̂ ours "
                  f"{ours_result.llc_mean:.2f}, devinterp2 {float(their_result['llc_mean']):.2f}")

        floor_row = B.step_row(f"plain forward+backward of the {name.upper()}, batch {args.batch}",
                               "floor: forward+backward (eager, no optimizer)", args.floor_steps, times["floor"])
        floor_row = B.step_row(floor_row["workload"], floor_row["variant"], args.floor_steps, times["floor"], floor_row)
        ours_row = B.step_row(workload, "ours: estimate_llc, sequential backend (CPU default)", work, times["ours"],
                              floor_row, llc_mean=ours_result.llc_mean, llc_std=ours_result.llc_std)
        their_row = B.step_row(workload, f"devinterp {devinterp_version}: devinterp.slt.llc.llc", work,
                               times["devinterp2"], floor_row, llc_mean=float(their_result["llc_mean"]),
                               llc_std=float(their_result["llc_std"]))
        rows += [floor_row, ours_row, their_row]
        for clock, column in (("", "ms_per_step"), (" (CPU time)", "cpu_ms_per_step")):
            ratios[f"{name}_vs_floor{clock}"] = floor_row[column] / ours_row[column]
            ratios[f"{name}_devinterp2_vs_floor{clock}"] = floor_row[column] / their_row[column]
            ratios[f"{name}_vs_devinterp2{clock}"] = their_row[column] / ours_row[column]

    print("\n| workload | variant | ms/step | x floor | CPU ms/step | x floor (CPU) | LLC mean ± std |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        llc_text = f"{r['llc_mean']:.2f} ± {r['llc_std']:.2f}" if "llc_mean" in r else ""
        print(f"| {r['workload'][:24]} | {r['variant']} | {r['ms_per_step']:.1f} | {r['x_floor']:.2f} | "
              f"{r['cpu_ms_per_step']:.1f} | {r['x_floor_cpu']:.2f} | {llc_text} |")
    for k, v in ratios.items():
        print(f"{k}: {v:.3f}")
    total = time.perf_counter() - t_start
    path = B.write_benchmark("llc_devinterp2", rows, ratios, threads, device=device, folder=args.out, **vars(args),
                             torch=torch.__version__, devinterp=devinterp_version, total_wall_s=round(total, 1),
                             loadavg_start=load_start, loadavg_end=B.loadavg())
    print(f"wrote {path} after {total:.0f} s; loadavg at end {B.loadavg()}")


if __name__ == "__main__":
    main()
