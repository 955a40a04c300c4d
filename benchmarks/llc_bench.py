"""Throughput of our SGLD LLC estimator against the floor and devinterp v1.3.2, in one process, same work.

Two workloads, each at SGLD batch 1024 on the same thread count:

- gpt: the project's linear-attention GPT (vocab 18, block 32, 1 layer, 1 head, d_model 64; 54,464
  parameters) trained briefly on moving-window sums (plateau_lib.engine.train, 300 Adam steps), on a fixed set
  of 8,192 sequences; loss: cross-entropy over every next-token position.
- mlp: a 64-192-192-1 GELU MLP (49,729 parameters) trained briefly (300 Adam steps) on 8,192 examples of
  a random teacher MLP plus noise; loss: mean squared error.

SGLD: 4 chains x ``--draws`` draws, epsilon 1e-4, gamma 100, nbeta = 1024 / ln 1024, each chain with
its own batches. Variants, alternated over ``--repeats`` rounds (floor, ours, devinterp, ...):

- floor: a plain eager forward+backward of the same model on one batch of 1024 (no optimizer, no
  sampler): what one chain-step cannot go below.
- ours: ``estimate_llc(..., backend="sequential")`` (the CPU default: one chain after another, plain
  forward+backward, fused ``_foreach`` update).
- devinterp: ``estimate_learning_coeff_with_summary`` with a shuffling DataLoader over a TensorDataset
  and ``SGLD`` (its documented entry point), ``cores=1``.
- once each: ours with ``compile=True`` (timed after an untimed warm-up call that compiles), and ours
  with ``backend="vmap"`` (all chains batched, the GPU default).

Time per chain-step = the call's time / (chains x draws); both wall and process CPU time are recorded.
Ratios are throughputs, ours / theirs (> 1: ours is faster): ``gpt_vs_floor`` = floor ms / ours ms,
``gpt_vs_devinterp`` = devinterp ms / ours ms, the same for mlp, ``*_compiled_*`` and ``*_vmap_*`` for
the other variants; plain names in wall time, ``(CPU time)`` ones in process CPU time (steadier on a
shared machine). Writes ``results/benchmarks/llc.json`` (``plateau_lib.book.benchmarks``), shown on the
book's Performance page. Run::

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/llc_bench.py --draws 30   # the committed run
    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/llc_bench.py --quick      # 4 x 5 draws, a smoke run
"""
from __future__ import annotations

import argparse
import copy
import math
import time
from importlib.metadata import version

import torch
import torch.nn as nn
import torch.nn.functional as F

from plateau_lib.book import benchmarks as B
from plateau_lib.engine.runs import TrainConfig
from plateau_lib.engine.train import train
from plateau_lib.engine.utils import cpu_threads
from plateau_lib.llc import SGLDConfig, estimate_llc
from plateau_lib.plateau import metrics as M
from plateau_lib.plateau.model import GPT

N_DATA = 8192


def seq_loss(model, seqs):
    return M.loss_all(model(seqs[:, :-1]), seqs)


def mse_loss(model, batch):
    return F.mse_loss(model(batch[0]), batch[1])


def gpt_workload(device):
    """The trained GPT, its 8,192 sequences, the loss, and devinterp's loss on a loader batch."""
    cfg = TrainConfig(task="mws", d_model=64, lr=1e-3, batch_size=256, steps=300, eval_every=300, device=device,
                      seed=0)
    model = GPT(cfg.model_config())
    model.load_state_dict(train(cfg, progress=False).final_state)
    seqs = cfg.make_task().sample(N_DATA, torch.Generator(device=device).manual_seed(123))
    return model.to(device), seqs, seq_loss, lambda m, batch: seq_loss(m, batch[0]), (seqs.cpu(),)


def mlp(seed):
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(64, 192), nn.GELU(), nn.Linear(192, 192), nn.GELU(), nn.Linear(192, 1))


def mlp_workload(device):
    """A student MLP trained 300 Adam steps (batch 1024) on a teacher's outputs plus noise."""
    g = torch.Generator().manual_seed(0)
    x = torch.randn(N_DATA, 64, generator=g)
    with torch.no_grad():
        y = mlp(1)(x) + 0.1 * torch.randn(N_DATA, 1, generator=g)
    model = mlp(0)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    for step in range(300):
        idx = torch.randint(0, N_DATA, (1024,), generator=g)
        opt.zero_grad()
        mse_loss(model, (x[idx], y[idx])).backward()
        opt.step()
    data = (x.to(device), y.to(device))
    return model.to(device), data, mse_loss, mse_loss, (x, y)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--chains", type=int, default=4)
    ap.add_argument("--draws", type=int, default=30)
    ap.add_argument("--batch", type=int, default=1024)
    ap.add_argument("--threads", type=int, default=1, help="intra-op threads, the same for every variant")
    ap.add_argument("--repeats", type=int, default=2, help="rounds of floor / ours / devinterp, alternated")
    ap.add_argument("--floor-steps", type=int, default=20, help="forward+backward steps per floor timing")
    ap.add_argument("--workloads", nargs="+", default=["gpt", "mlp"], choices=["gpt", "mlp"])
    ap.add_argument("--quick", action="store_true", help="5 draws, 1 round, 5 floor steps (smoke run)")
    ap.add_argument("--out", default=None, help="folder for the JSON (default results/benchmarks)")
    ap.add_argument("--note", default="", help="a line kept with the run's arguments")
    args = ap.parse_args()
    if args.quick:
        args.draws, args.repeats, args.floor_steps = 5, 1, 5
    threads = cpu_threads(args.threads)
    load_start = B.loadavg()
    t_start = time.perf_counter()
    device = "cuda" if torch.cuda.is_available() else "cpu"
    print(f"torch {torch.__version__}, device {B.device_name(device)}, threads {threads}, {B.machine()}, "
          f"loadavg {load_start}")
    from devinterp.optim.sgld import SGLD
    from devinterp.slt.sampler import estimate_learning_coeff_with_summary

    nbeta = args.batch / math.log(args.batch)
    sgld = SGLDConfig(epsilon=1e-4, gamma=100.0, nbeta=nbeta, num_chains=args.chains, num_draws=args.draws,
                      batch_size=args.batch, seed=0)
    work = args.chains * args.draws
    rows, ratios = [], {}
    for name in args.workloads:
        model, data, loss_fn, their_loss, their_data = (gpt_workload if name == "gpt" else mlp_workload)(device)
        n_params = sum(p.numel() for p in model.parameters())
        workload = f"SGLD LLC of the {name.upper()} ({n_params:,} parameters), batch {args.batch}, " \
                   f"{args.chains} chains x {args.draws} draws"
        print(f"\n{workload}")

        def ours(**kw):
            out = {}
            times = B.timed(lambda: out.update(r=estimate_llc(model, loss_fn, data, sgld, device=device, warn=False,
                                                              **kw)), device)
            return times, out["r"]

        def theirs():
            loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(*their_data), batch_size=args.batch,
                                                 shuffle=True)
            out = {}
            times = B.timed(lambda: out.update(r=estimate_learning_coeff_with_summary(
                model, loader, evaluate=their_loss, sampling_method=SGLD,
                optimizer_kwargs=dict(lr=sgld.epsilon, localization=sgld.gamma, nbeta=nbeta),
                num_chains=args.chains, num_draws=args.draws, seed=0, device=device, verbose=False)), device)
            return times, out["r"]

        floor_model = copy.deepcopy(model)
        batch = data[:args.batch] if isinstance(data, torch.Tensor) else tuple(t[:args.batch] for t in data)
        floor = B.floor_step(floor_model, loss_fn, batch)
        times = {"floor": [], "ours": [], "devinterp": []}
        for _ in range(args.repeats):
            times["floor"].append(B.time_steps(floor, args.floor_steps, device=device))
            t, ours_result = ours(backend="sequential")
            times["ours"].append(t)
            t, their_result = theirs()
            times["devinterp"].append(t)
            print(f"  round: floor {1000 * times['floor'][-1][0] / args.floor_steps:.1f} ms, ours "
                  f"{1000 * times['ours'][-1][0] / work:.1f} ms, devinterp {1000 * times['devinterp'][-1][0] / work:.1f}"
                  f" ms per chain-step (wall)")
        warm_start = time.perf_counter()
        estimate_llc(model, loss_fn, data, sgld.replace(num_chains=1, num_draws=2), device=device, compile=True,
                     warn=False)
        compile_s = time.perf_counter() - warm_start
        compiled_times, compiled = ours(backend="sequential", compile=True)
        vmap_times, vmapped = ours(backend="vmap")

        floor_row = B.step_row(f"plain forward+backward of the {name.upper()}, batch {args.batch}",
                               "floor: forward+backward (eager, no optimizer)", args.floor_steps, times["floor"])
        floor_row = B.step_row(floor_row["workload"], floor_row["variant"], args.floor_steps, times["floor"], floor_row)
        variants = {
            "ours": ("ours: estimate_llc, sequential backend (CPU default)", times["ours"], ours_result.llc_mean,
                     ours_result.llc_std),
            "compiled": (f"ours: sequential, compiled (after a {compile_s:.0f} s warm-up call)", [compiled_times],
                         compiled.llc_mean, compiled.llc_std),
            "vmap": ("ours: estimate_llc, vmap backend (GPU default)", [vmap_times], vmapped.llc_mean, vmapped.llc_std),
            "devinterp": (f"devinterp {version('devinterp')}: estimate_learning_coeff_with_summary",
                          times["devinterp"], float(their_result["llc/mean"]), float(their_result["llc/std"])),
        }
        rows.append(floor_row)
        by_key = {}
        for key, (variant, t, mean, std) in variants.items():
            by_key[key] = B.step_row(workload, variant, work, t, floor_row, llc_mean=mean, llc_std=std)
            rows.append(by_key[key])
        for key, suffix in (("ours", ""), ("compiled", "_compiled"), ("vmap", "_vmap")):
            row = by_key[key]
            ratios[f"{name}{suffix}_vs_floor"] = floor_row["ms_per_step"] / row["ms_per_step"]
            ratios[f"{name}{suffix}_vs_floor (CPU time)"] = floor_row["cpu_ms_per_step"] / row["cpu_ms_per_step"]
            ratios[f"{name}{suffix}_vs_devinterp"] = by_key["devinterp"]["ms_per_step"] / row["ms_per_step"]
            ratios[f"{name}{suffix}_vs_devinterp (CPU time)"] = (by_key["devinterp"]["cpu_ms_per_step"]
                                                                 / row["cpu_ms_per_step"])

    print("\n| workload | variant | ms/step | x floor | CPU ms/step | x floor (CPU) | LLC mean ± std |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        llc = f"{r['llc_mean']:.2f} ± {r['llc_std']:.2f}" if "llc_mean" in r else ""
        print(f"| {r['workload'][:24]} | {r['variant']} | {r['ms_per_step']:.1f} | {r['x_floor']:.2f} | "
              f"{r['cpu_ms_per_step']:.1f} | {r['x_floor_cpu']:.2f} | {llc} |")
    for k, v in ratios.items():
        print(f"{k}: {v:.3f}")
    total = time.perf_counter() - t_start
    path = B.write_benchmark("llc", rows, ratios, threads, device=device, folder=args.out, **vars(args),
                             torch=torch.__version__, total_wall_s=round(total, 1), loadavg_start=load_start,
                             loadavg_end=B.loadavg())
    print(f"wrote {path} after {total:.0f} s; loadavg at end {B.loadavg()}")


if __name__ == "__main__":
    main()
