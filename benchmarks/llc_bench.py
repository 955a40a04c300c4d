"""Throughput of our batched SGLD LLC estimator vs devinterp v1.3.2 and the floor, in one process, same work.

Workload (the issue's): the project's linear-attention GPT (vocab 18, block 32, 1 layer, 1 head,
d_model 64; 54,464 parameters) trained briefly on moving-window sums (plateau_lib.train, 300 Adam
steps, lr 1e-3, batch 256); a fixed set of 8,192 sequences; SGLD with batch 1024, 4 chains x 200
draws by default, epsilon 1e-4, gamma 100, nbeta = 1024 / ln 1024. Both estimators run the same number
of forward/backward passes (chains x draws chain-steps of batch 1024) on the same thread count.

- floor: a plain eager forward+backward of the same model on one batch of 1024 (no optimizer, no
  sampler): what one chain-step cannot go below. Timed before and after the samplers.
- ours: ``plateau_lib.llc.estimate_llc`` (chains batched with vmap, index batching, no host syncs),
  timed before and after devinterp (``--ours-repeats``).
- devinterp: ``estimate_learning_coeff_with_summary`` with a shuffling DataLoader over a
  TensorDataset and ``SGLD`` (its documented entry point), ``cores=1``.

Time per chain-step = the sampling call's time / (chains x draws) (ours: ``estimate_llc`` including its
init loss on the full 8,192 sequences; devinterp: its whole call); both wall and process CPU time
are recorded. Writes ``results/benchmarks/llc_bench-<device>.json`` (``plateau_lib.benchmarks``), shown
on the book's Performance page. Run::

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/llc_bench.py              # full: about 18 min on a busy 2-core CPU
    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/llc_bench.py --draws 50   # the same at a quarter of the draws
    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/llc_bench.py --quick      # 4 x 20 draws, a smoke run
"""
from __future__ import annotations

import argparse
import math
import time
from importlib.metadata import version

import torch

from plateau_lib import benchmarks as B
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
    ap.add_argument("--quick", action="store_true", help="20 draws instead of --draws (smoke run)")
    ap.add_argument("--floor-steps", type=int, default=50, help="forward+backward steps per floor timing")
    ap.add_argument("--ours-repeats", type=int, default=2, help="timings of ours, split before/after devinterp")
    ap.add_argument("--skip-devinterp", action="store_true")
    ap.add_argument("--compile", action="store_true", help="also time ours with torch.compile")
    ap.add_argument("--out", default=None, help="folder for the JSON (default results/benchmarks)")
    ap.add_argument("--note", default="", help="a line kept with the run's arguments (e.g. why it was cut short)")
    args = ap.parse_args()
    draws = 20 if args.quick else args.draws
    threads = cpu_threads(args.threads)
    load_start = B.loadavg()
    t_start = time.perf_counter()
    device = "cuda" if torch.cuda.is_available() else "cpu"
    print(f"torch {torch.__version__}, device {B.device_name(device)}, threads {threads}, {B.machine()}, "
          f"loadavg {load_start}")

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
    workload = (f"SGLD LLC of the MWS GPT ({n_params:,} parameters), batch {args.batch}, {args.chains} chains x "
                f"{draws} draws")

    def ours(**kw):
        out = {}
        times = B.timed(lambda: out.update(r=estimate_llc(model, seq_loss, seqs, num_chains=args.chains,
                                                          num_draws=draws, batch_size=args.batch, seed=0,
                                                          share_batches=False, device=device, **hp, **kw)), device)
        return times, out["r"]

    floor_model = GPT(cfg.model_config()).to(device)
    floor_model.load_state_dict(model.state_dict())
    floor = B.floor_step(floor_model, seq_loss, seqs[:args.batch])
    floor_times, ours_times = [B.time_steps(floor, args.floor_steps, device=device)], []
    n_before = max(1, args.ours_repeats // 2) if not args.skip_devinterp else args.ours_repeats
    for _ in range(n_before):
        times, ours_result = ours()
        ours_times.append(times)
    extra_rows = []
    if args.compile:
        times, comp = ours(compile=True)
        extra_rows.append(("ours: estimate_llc, compile=True (wall includes compiling)", times, comp))

    dev_row = None
    if not args.skip_devinterp:
        from devinterp.optim.sgld import SGLD
        from devinterp.slt.sampler import estimate_learning_coeff_with_summary
        loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(seqs.cpu()), batch_size=args.batch,
                                             shuffle=True)
        out = {}
        dev_times = B.timed(lambda: out.update(r=estimate_learning_coeff_with_summary(
            model, loader, evaluate=devinterp_loss, sampling_method=SGLD,
            optimizer_kwargs=dict(lr=hp["epsilon"], localization=hp["gamma"], nbeta=nbeta),
            num_chains=args.chains, num_draws=draws, seed=0, device=device, verbose=False)), device)
        dev_row = (f"devinterp {version('devinterp')}: estimate_learning_coeff_with_summary", dev_times,
                   float(out["r"]["llc/mean"]), float(out["r"]["llc/std"]))
        for _ in range(args.ours_repeats - n_before):
            times, ours_result = ours()
            ours_times.append(times)
    floor_times.append(B.time_steps(floor, args.floor_steps, device=device))

    floor_row = B.step_row(f"plain forward+backward of the same model, batch {args.batch}",
                           "floor: forward+backward (eager, no optimizer)", args.floor_steps, floor_times)
    floor_row = B.step_row(floor_row["workload"], floor_row["variant"], args.floor_steps, floor_times, floor_row)
    rows = [floor_row, B.step_row(workload, "ours: estimate_llc (vmap chains)", work, ours_times, floor_row,
                                  llc_mean=ours_result.llc_mean, llc_std=ours_result.llc_std)]
    pairs = {"ours per chain-step / floor fwd+bwd": (rows[1], floor_row)}
    for name, times, result in extra_rows:
        rows.append(B.step_row(workload, name, work, [times], floor_row, llc_mean=result.llc_mean,
                               llc_std=result.llc_std))
        pairs["ours compiled per chain-step / floor fwd+bwd"] = (rows[-1], floor_row)
    if dev_row is not None:
        name, times, mean, std = dev_row
        rows.append(B.step_row(workload, name, work, [times], floor_row, llc_mean=mean, llc_std=std))
        pairs["devinterp per chain-step / floor fwd+bwd"] = (rows[-1], floor_row)
        pairs["devinterp / ours per chain-step (our speed-up)"] = (rows[-1], rows[1])
    ratios = B.time_ratios(pairs, device)

    if device == "cuda":  # chains run together: 10 chains should cost little more than one
        scaling = {}
        for c in (1, 10):
            estimate_llc(model, seq_loss, seqs, num_chains=c, num_draws=5, batch_size=args.batch, device=device, **hp)
            scaling[c] = B.timed(lambda: estimate_llc(model, seq_loss, seqs, num_chains=c, num_draws=draws,
                                                      batch_size=args.batch, device=device, **hp), device)
            rows.append(B.step_row(workload.replace(f"{args.chains} chains", f"{c} chains"),
                                   f"ours: estimate_llc, {c} chain{'s' if c > 1 else ''}", c * draws,
                                   [scaling[c]], floor_row))
        ratios["GPU: 10 chains / 1 chain, wall time of the call"] = scaling[10][0] / scaling[1][0]

    print(f"\nwork: {args.chains} chains x {draws} draws = {work} SGLD steps of batch {args.batch}")
    print("| variant | steps | wall s | steps/s | ms/step | x floor | CPU ms/step | x floor (CPU) | LLC mean ± std |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        llc = f"{r['llc_mean']:.2f} ± {r['llc_std']:.2f}" if "llc_mean" in r else ""
        print(f"| {r['variant']} | {r['steps']} | {r['wall_s']:.1f} | {r['steps_per_s']:.2f} | {r['ms_per_step']:.1f} | "
              f"{r['x_floor']:.2f} | {r['cpu_ms_per_step']:.1f} | {r['x_floor_cpu']:.2f} | {llc} |")
    for k, v in ratios.items():
        print(f"{k}: {v:.3f}")
    total = time.perf_counter() - t_start
    path = B.write_benchmark(f"llc_bench-{device}", rows, ratios, threads, device=device, folder=args.out,
                             **{**vars(args), "draws": draws}, torch=torch.__version__, total_wall_s=round(total, 1),
                             loadavg_start=load_start, loadavg_end=B.loadavg())
    print(f"wrote {path} after {total:.0f} s; loadavg at end {B.loadavg()}")


if __name__ == "__main__":
    main()
