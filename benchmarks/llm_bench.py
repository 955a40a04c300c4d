"""The collapse chapter's two costs, side by side in one process: training the miniature against its floor, and
the paper's one-prompt-at-a-time analysis against the batched one.

- floor: a plain eager forward+backward of the ``--preset`` miniature (Pythia-14m's architecture) on one batch;
  the training step is ``engine.train``'s own (batch sampling, AdamW, clipping, the kept training loss), timed
  between its step callbacks (``train step / floor``);
- analysis of ``--prompts`` ARC-Easy questions at one checkpoint: ``generate_reference`` (the paper's loop:
  ``model.generate``, batch 1, no KV cache) against ``generate`` (left-padded batches of ``--batch``, no cache);
  ``one prompt at a time / batched`` is the speed-up of batching.
Each variant is the median of ``--repeats`` alternated repeats. Writes ``results/benchmarks/llm.json`` (merged
with other devices' records).

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/llm_bench.py            # CPU
    python benchmarks/llm_bench.py --preset paper                         # GPU
"""
import argparse
import time

import torch

from plateau_lib.book import benchmarks as B
from plateau_lib.engine import presets as engine_presets
from plateau_lib.engine.train import train
from plateau_lib.engine.utils import cpu_threads, resolve_device
from plateau_lib.llm import collapse, corpus, miniature, presets
from plateau_lib.llm.task import next_token_loss


def engine_steps(cfg, steps: int, device) -> tuple[float, float]:
    """(wall, CPU) seconds of ``steps`` steps of ``engine.train`` on ``cfg``, read between its step callbacks after
    one untimed step (building the model and the two evaluations fall outside)."""
    marks = []

    def mark(step, model):
        B.synchronize(device)
        marks.append((time.perf_counter(), time.process_time()))

    train(cfg.replace(steps=steps + 1, eval_every=steps + 1, checkpoint_steps=(), eval_steps=()), callbacks=[mark],
          progress=False)
    return marks[-1][0] - marks[0][0], marks[-1][1] - marks[0][1]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--preset", default="cpu", choices=engine_presets.PRESETS)
    ap.add_argument("--steps", type=int, default=5, help="training steps per repeat")
    ap.add_argument("--prompts", type=int, default=16)
    ap.add_argument("--batch", type=int, default=16, help="prompts per batch of the batched analysis")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--device", default="auto")
    ap.add_argument("--out", default=None, help="folder for the JSON (default results/benchmarks)")
    args = ap.parse_args()
    threads = cpu_threads(args.threads)
    load_start, t_start = B.loadavg(), time.perf_counter()
    device = resolve_device(args.device)
    cfg = next(iter(presets.llm_miniatures(args.preset, seeds=[0]).values()))
    model = miniature.build_model(cfg).to(device)
    run = miniature.train_config(cfg.replace(device=str(device)))
    batch = torch.randint(0, 50_000, (cfg.batch_size, cfg.context + 1), generator=torch.Generator().manual_seed(0)).to(device)
    tok = corpus.tokenizer(cfg.arch)
    ids = [tok(q, add_special_tokens=False)["input_ids"] for q in corpus.prompts(args.prompts, 0)]

    train_work = f"miniature ({args.preset}): {cfg.batch_size} x {cfg.context} tokens per step"
    analysis_work = f"analysis: {args.prompts} ARC-Easy prompts, 8 greedy tokens, no KV cache"
    runs = {"floor: forward+backward": lambda: B.time_steps(B.floor_step(model, next_token_loss, batch), args.steps,
                                                             warmup=1, device=device),
            "engine.train step (clip + AdamW)": lambda: engine_steps(run, args.steps, device),
            "one prompt at a time (the paper's loop)": lambda: B.timed(lambda: collapse.generate_reference(model, ids),
                                                                       device),
            f"batched (left padding, {args.batch} per batch)": lambda: B.timed(
                lambda: collapse.generate(model, ids, batch_size=args.batch), device)}
    times = {k: [] for k in runs}
    for repeat in range(args.repeats):
        for name in list(runs)[repeat % len(runs):] + list(runs)[:repeat % len(runs)]:
            times[name].append(runs[name]())
    names = list(runs)
    floor = B.step_row(train_work, names[0], args.steps, times[names[0]])
    floor = B.step_row(train_work, names[0], args.steps, times[names[0]], floor)  # 1x, drawn beside the step
    step = B.step_row(train_work, names[1], args.steps, times[names[1]], floor)
    single = B.step_row(analysis_work, names[2], args.prompts, times[names[2]])
    batched = B.step_row(analysis_work, names[3], args.prompts, times[names[3]])
    rows = [floor, step, single, batched]
    ratios = B.time_ratios({"train step / floor fwd+bwd": (step, floor),
                            "one prompt at a time / batched analysis": (single, batched)}, device)
    for row in rows:
        print(f"{row['workload'][:50]:50s} {row['variant']:42s} {row['ms_per_step']:10.1f} ms per step or prompt")
    for k, v in ratios.items():
        print(f"{k}: {v:.3f}")
    path = B.write_benchmark("llm", rows, ratios, threads, device=device, folder=args.out, merge=True,
                             **{k: v for k, v in vars(args).items() if k != "device"}, torch=torch.__version__,
                             loadavg_start=load_start, loadavg_end=B.loadavg(),
                             total_wall_s=round(time.perf_counter() - t_start, 1))
    print(f"wrote {path} after {time.perf_counter() - t_start:.0f} s")


if __name__ == "__main__":
    main()
