"""The stages page's ``paper`` preset (Hoogland et al.: the L2H4 model of 51,717 parameters, D = 4, K = 8,
batch 256, 500k steps; λ̂ at 190 checkpoints, 10 chains x 5,000 draws at m = 1,024): what one training step
and one λ̂ checkpoint cost on this device, against their floors, and what the whole preset would take.

Variants, each the median of ``--repeats`` alternated repeats, all on the paper's model and batch sizes:
- floor: a plain eager forward+backward (and + Adam) on one batch of 256: what a training step cannot go below;
- ``train()``: the paper's config shortened to ``--steps`` steps (its one-cycle schedule over them), evaluation
  on its 1,024 sequences at the start and the end only;
- SGLD floor: a plain forward+backward on one batch of 1,024: what one chain-step cannot go below;
- λ̂ at one checkpoint: ``estimate_llc`` with the paper's SGLD settings except ``--draws`` draws (10 chains), on
  ``--n-data`` fixed sequences (the paper's 2^20 do not change a step's cost), per chain-step;
- on a GPU also 8 checkpoints at once (``llc_over_checkpoints(stack=8)``, what the ``make paper`` queue uses
  there), per chain-step of one checkpoint.

The ``*_extrapolated_s`` ratios multiply these out to the preset: 500k training steps, one checkpoint's
10 x 5,000 chain-steps, and 190 checkpoints (stacked where that was measured). They are extrapolations from
short runs. Writes ``results/benchmarks/icl.json`` (merged with other devices' records), shown on the
Performance page.

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/icl_bench.py     # CPU (the committed run)
    python benchmarks/icl_bench.py --steps 500 --draws 50           # a lent GPU
"""
import argparse
import time

import torch

from plateau_lib.book import benchmarks as B
from plateau_lib.engine.train import train
from plateau_lib.engine.utils import cpu_threads, resolve_device
from plateau_lib.icl import presets
from plateau_lib.icl.development import llc_data
from plateau_lib.llc import estimate_llc, llc_over_checkpoints

STACK = 8  # checkpoints per batched SGLD computation on a GPU (paper.ANALYSIS_STACK)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=200, help="training steps per repeat (and floor steps)")
    ap.add_argument("--draws", type=int, default=10, help="SGLD draws per chain per repeat (the paper: 5,000)")
    ap.add_argument("--n-data", type=int, default=2**14, help="fixed SGLD sequences (the paper: 2^20)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--device", default="auto")
    ap.add_argument("--out", default=None, help="folder for the JSON (default results/benchmarks)")
    args = ap.parse_args()
    threads = cpu_threads(args.threads)
    load_start, t_start = B.loadavg(), time.perf_counter()
    device = resolve_device(args.device)
    gpu = device.type == "cuda"
    cfg, llc = presets.icl_stages("paper", {"device": str(device)})
    task = cfg.make_task()
    model = task.build_model(cfg).to(device)
    gen = torch.Generator(device=device).manual_seed(0)
    batch, sgld_batch = task.sample(cfg.batch_size, gen), task.sample(llc.batch_size, gen)
    data = llc_data(cfg, args.n_data, llc.seed, device)
    adam = torch.optim.Adam(model.parameters(), lr=cfg.lr)
    short = cfg.replace(steps=args.steps, eval_every=args.steps, checkpoint_steps=(), eval_steps=())
    settings = llc.replace(num_draws=args.draws)
    chain_steps = settings.num_chains * (args.draws + settings.num_burnin_steps)
    state = {k: v.detach().clone() for k, v in model.state_dict().items()}

    runs = {"floor: forward+backward": lambda: B.time_steps(B.floor_step(model, task.loss, batch), args.steps,
                                                             device=device),
            "floor: forward+backward+Adam": lambda: B.time_steps(B.floor_step(model, task.loss, batch, adam),
                                                                  args.steps, device=device),
            "train(), evaluation at the start and end": lambda: B.timed(lambda: train(short, progress=False), device),
            "SGLD floor: forward+backward": lambda: B.time_steps(B.floor_step(model, task.loss, sgld_batch),
                                                                  args.draws, device=device),
            "λ̂ at one checkpoint (estimate_llc)": lambda: B.timed(lambda: estimate_llc(
                model, task.loss, data, settings, device=str(device), warn=False), device)}
    if gpu:
        runs[f"λ̂ at {STACK} checkpoints at once (stack={STACK})"] = lambda: B.timed(lambda: llc_over_checkpoints(
            model, task.loss, data, [(i, state) for i in range(STACK)], settings, stack=STACK, progress=False,
            warn=False, device=str(device)), device)
    times = {k: [] for k in runs}
    for repeat in range(args.repeats):  # alternate, starting each repeat with the next variant
        for name in list(runs)[repeat % len(runs):] + list(runs)[:repeat % len(runs)]:
            model.load_state_dict(state)
            times[name].append(runs[name]())

    train_work = f"training: L2H4 (51,717 parameters), batch {cfg.batch_size}, {args.steps} steps"
    sgld_work = (f"λ̂: m {llc.batch_size}, {settings.num_chains} chains x {args.draws} draws, "
                 f"{args.n_data:,} sequences (per chain-step of one checkpoint)")
    floor = B.step_row(train_work, "floor: forward+backward", args.steps, times["floor: forward+backward"])
    floor = B.step_row(train_work, "floor: forward+backward", args.steps, times["floor: forward+backward"], floor)
    sgld_floor = B.step_row(sgld_work, "SGLD floor: forward+backward", args.draws,
                            times["SGLD floor: forward+backward"])
    sgld_floor = B.step_row(sgld_work, "SGLD floor: forward+backward", args.draws,
                            times["SGLD floor: forward+backward"], sgld_floor)
    per = {"floor: forward+backward+Adam": args.steps, "train(), evaluation at the start and end": args.steps,
           "λ̂ at one checkpoint (estimate_llc)": chain_steps}
    rows = [floor]
    rows += [B.step_row(train_work, name, per[name], times[name], floor) for name in list(runs)[1:3]]
    rows += [sgld_floor, B.step_row(sgld_work, "λ̂ at one checkpoint (estimate_llc)", chain_steps,
                                    times["λ̂ at one checkpoint (estimate_llc)"], sgld_floor)]
    if gpu:
        name = list(runs)[-1]
        rows.append(B.step_row(sgld_work, name, chain_steps * STACK, times[name], sgld_floor))
    adam_row, train_row, llc_row = rows[1], rows[2], rows[4]
    prefix = "gpu" if gpu else "cpu"
    paper_chain_steps = llc.num_chains * (llc.num_draws + llc.num_burnin_steps)
    checkpoints = len(cfg.checkpoint_steps)
    ratios = B.time_ratios({"train() / floor fwd+bwd+Adam": (train_row, adam_row),
                            "λ̂ chain-step / SGLD floor": (llc_row, sgld_floor)}, device)
    ratios[f"{prefix}_paper_training_{cfg.steps // 1000}k_steps_extrapolated_s"] = train_row["ms_per_step"] * cfg.steps / 1e3
    ratios[f"{prefix}_paper_llc_one_checkpoint_extrapolated_s"] = llc_row["ms_per_step"] * paper_chain_steps / 1e3
    best = rows[-1]["ms_per_step"] if gpu else llc_row["ms_per_step"]
    ratios[f"{prefix}_paper_llc_{checkpoints}_checkpoints_extrapolated_s"] = best * paper_chain_steps * checkpoints / 1e3

    print(f"device {device}, threads {threads}")
    for row in rows:
        print(f"{row['workload'][:44]:44s} {row['variant']:46s} {row['ms_per_step']:9.3f} ms/step "
              f"(x floor {row.get('x_floor', 1):5.2f})")
    for k, v in ratios.items():
        print(f"{k}: {v:,.3f}")
    path = B.write_benchmark("icl", rows, ratios, threads, device=device, folder=args.out, merge=True,
                             **{k: v for k, v in vars(args).items() if k != "device"}, torch=torch.__version__,
                             loadavg_start=load_start, loadavg_end=B.loadavg(),
                             total_wall_s=round(time.perf_counter() - t_start, 1))
    print(f"wrote {path} after {time.perf_counter() - t_start:.0f} s")


if __name__ == "__main__":
    main()
