"""Throughput of our batched SGLD LLC estimator vs devinterp v1.3.2, in one process, same work.

Workload (the issue's): the project's linear-attention GPT (vocab 18, block 32, 1 layer, 1 head,
d_model 64; 54,464 parameters) trained briefly on moving-window sums (plateau_lib.train, 300 Adam
steps, lr 1e-3, batch 256); a fixed set of 8,192 sequences; SGLD with batch 1024, 4 chains x 200
draws, epsilon 1e-4, gamma 100, nbeta = 1024 / ln 1024. Both estimators run the same number of
forward/backward passes (800 chain-steps of batch 1024) on the same thread count.

- ours: ``plateau_lib.llc.estimate_llc`` (chains batched with vmap, index batching, no host syncs).
- devinterp: ``estimate_learning_coeff_with_summary`` with a shuffling DataLoader over a
  TensorDataset and ``SGLD`` (its documented entry point), ``cores=1``.

Throughput = chain-steps per second of the sampling call (ours: wall time of ``estimate_llc``,
including its init loss on the full 8,192 sequences; devinterp: its whole call). Run::

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/llc_bench.py            # full (about 10 min on 2 cores)
    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/llc_bench.py --quick    # 4 x 20 draws, a smoke run
"""
from __future__ import annotations

import argparse
import math
import os
import platform
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run from anywhere without installing

from plateau_lib import metrics as M
from plateau_lib.llc import estimate_llc
from plateau_lib.model import GPT
from plateau_lib.train import TrainConfig, train
from plateau_lib.utils import cpu_threads


def seq_loss(model, seqs):
    return M.loss_all(model(seqs[:, :-1]), seqs)


def devinterp_loss(model, batch):
    return seq_loss(model, batch[0])


def trained_model(steps: int, device: str):
    cfg = TrainConfig(task="mws", d_model=64, lr=1e-3, batch_size=256, steps=steps, eval_every=max(steps, 1),
                      device=device, seed=0)
    res = train(cfg, progress=False)
    model = GPT(cfg.model_config())
    model.load_state_dict(res.final_state)
    return model.to(device), cfg


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--chains", type=int, default=4)
    ap.add_argument("--draws", type=int, default=200)
    ap.add_argument("--batch", type=int, default=1024)
    ap.add_argument("--threads", type=int, default=1, help="intra-op threads, the same for both")
    ap.add_argument("--quick", action="store_true", help="20 draws instead of 200 (smoke run)")
    ap.add_argument("--skip-devinterp", action="store_true")
    ap.add_argument("--compile", action="store_true", help="also time ours with torch.compile")
    args = ap.parse_args()
    draws = 20 if args.quick else args.draws
    threads = cpu_threads(args.threads)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    print(f"torch {torch.__version__}, device {device}, threads {threads}, cpus {os.cpu_count()}, "
          f"{platform.processor() or platform.machine()}, loadavg {os.getloadavg()}")

    t0 = time.perf_counter()
    model, cfg = trained_model(300, device)
    task = cfg.make_task()
    seqs = task.sample(8192, torch.Generator(device=device).manual_seed(123))
    with torch.no_grad():
        full_loss = seq_loss(model, seqs).item()
    n_params = sum(p.numel() for p in model.parameters())
    nbeta = args.batch / math.log(args.batch)
    print(f"model params={n_params}, trained {cfg.steps} steps in {time.perf_counter() - t0:.1f}s, "
          f"loss at w* (8192 seqs)={full_loss:.4f}, nbeta={nbeta:.3f}")
    hp = dict(epsilon=1e-4, gamma=100.0, nbeta=nbeta)
    work = args.chains * draws

    rows = []
    t0 = time.perf_counter()
    ours = estimate_llc(model, seq_loss, seqs, num_chains=args.chains, num_draws=draws, batch_size=args.batch,
                        seed=0, share_batches=False, device=device, **hp)
    t_ours = time.perf_counter() - t0
    rows.append(("ours (estimate_llc, vmap chains)", t_ours, ours.llc_mean, ours.llc_std))
    if args.compile:
        t0 = time.perf_counter()
        comp = estimate_llc(model, seq_loss, seqs, num_chains=args.chains, num_draws=draws, batch_size=args.batch,
                            seed=0, share_batches=False, device=device, compile=True, **hp)
        rows.append(("ours, compile=True (wall time includes compiling)", time.perf_counter() - t0, comp.llc_mean,
                     comp.llc_std))

    if not args.skip_devinterp:
        from devinterp.optim.sgld import SGLD
        from devinterp.slt.sampler import estimate_learning_coeff_with_summary
        loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(seqs.cpu()), batch_size=args.batch,
                                             shuffle=True)
        t0 = time.perf_counter()
        out = estimate_learning_coeff_with_summary(
            model, loader, evaluate=devinterp_loss, sampling_method=SGLD,
            optimizer_kwargs=dict(lr=hp["epsilon"], localization=hp["gamma"], nbeta=nbeta),
            num_chains=args.chains, num_draws=draws, seed=0, device=device, verbose=False)
        t_dev = time.perf_counter() - t0
        rows.append(("devinterp 1.3.2 estimate_learning_coeff_with_summary", t_dev, float(out["llc/mean"]),
                     float(out["llc/std"])))

    print(f"\nwork: {args.chains} chains x {draws} draws = {work} SGLD steps of batch {args.batch}")
    print("| estimator | wall s | chain-steps/s | ms/step | LLC mean ± std (chains) |")
    print("|---|---|---|---|---|")
    for name, t, mean, std in rows:
        print(f"| {name} | {t:.1f} | {work / t:.2f} | {1000 * t / work:.1f} | {mean:.2f} ± {std:.2f} |")
    if not args.skip_devinterp:
        t_dev = rows[-1][1]
        for name, t, _, _ in rows[:-1]:
            print(f"throughput ratio {name} / devinterp = {t_dev / t:.2f}x (target >= 4x on this CPU)")

    if device == "cuda":
        times = {}
        for c in (1, 10):
            estimate_llc(model, seq_loss, seqs, num_chains=c, num_draws=5, batch_size=args.batch, device=device, **hp)
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            estimate_llc(model, seq_loss, seqs, num_chains=c, num_draws=draws, batch_size=args.batch, device=device,
                         **hp)
            torch.cuda.synchronize()
            times[c] = time.perf_counter() - t0
        print(f"GPU: 1 chain {times[1]:.2f}s, 10 chains {times[10]:.2f}s, ratio {times[10] / times[1]:.2f} "
              "(target <= 1.5)")
    else:
        print("No GPU in this session: the GPU target (10 chains cost <= 1.5x one chain) was not measured.")
    print(f"loadavg at end {os.getloadavg()}")


if __name__ == "__main__":
    main()
