"""Do our λ̂ and devinterp 1.3.2's agree on llc_bench.py's workloads, seed by seed over many seeds?

``llc_bench.py`` times one estimate of each (4 chains x 30 draws, seed 0), and one estimate at that size is
noisy: its chains spread by about a fifth of λ̂ on the MLP. This script runs both estimators at exactly
``llc_bench.py``'s settings (its trained models, data, epsilon 1e-4, gamma 100, nbeta = 1024 / ln 1024,
batch 1024, each chain with its own batches, each estimator its own init loss) for ``--seeds`` seeds
each, and writes one row per workload, estimator and seed to ``results/benchmarks/llc_agreement.csv``
(atomically, and resumably: seeds already in the file are skipped). The Performance page reads it with
``plateau_lib.book.benchmarks.estimator_agreement``: the two means over seeds and their difference
with its standard error. Run::

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/llc_agreement.py --workloads mlp --seeds 32  # the committed MLP rows
    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/llc_agreement.py --workloads gpt --seeds 4   # the committed GPT rows
"""
from __future__ import annotations

import argparse
import math
from importlib.metadata import version

import pandas as pd
import torch
from tqdm import tqdm

from llc_bench import gpt_workload, mlp_workload
from plateau_lib.book.benchmarks import AGREEMENT_COLUMNS, AGREEMENT_PATH
from plateau_lib.engine.utils import atomic_path, cpu_threads
from plateau_lib.llc import SGLDConfig, estimate_llc

FIRST_SEED = 100  # seeds 100, 101, ...: apart from llc_bench.py's seed 0, whose single record prompted this check


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workloads", nargs="+", default=["mlp"], choices=["gpt", "mlp"])
    ap.add_argument("--seeds", type=int, default=32, help="estimates of each estimator per workload (default 32)")
    ap.add_argument("--chains", type=int, default=4)
    ap.add_argument("--draws", type=int, default=30)
    ap.add_argument("--batch", type=int, default=1024)
    args = ap.parse_args()
    for name in ("seeds", "chains", "draws", "batch"):
        if getattr(args, name) < 1:
            ap.error(f"--{name} must be a positive integer, got {getattr(args, name)}")
    cpu_threads(1)
    from devinterp.optim.sgld import SGLD
    from devinterp.slt.sampler import estimate_learning_coeff_with_summary

    nbeta = args.batch / math.log(args.batch)
    theirs_name = f"devinterp {version('devinterp')}"
    old = pd.read_csv(AGREEMENT_PATH) if AGREEMENT_PATH.exists() else pd.DataFrame(columns=AGREEMENT_COLUMNS)
    rows = old.to_dict("records")
    for name in args.workloads:
        done = set(old.loc[old["workload"] == name, "seed"])
        todo = [s for s in range(FIRST_SEED, FIRST_SEED + args.seeds) if s not in done]
        if not todo:
            continue
        model, data, loss_fn, their_loss, their_data = (gpt_workload if name == "gpt" else mlp_workload)("cpu")
        for seed in tqdm(todo, desc=f"{name}: seeds"):
            sgld = SGLDConfig(epsilon=1e-4, gamma=100.0, nbeta=nbeta, num_chains=args.chains, num_draws=args.draws,
                              batch_size=args.batch, seed=seed)
            ours = estimate_llc(model, loss_fn, data, sgld, device="cpu", warn=False)
            loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(*their_data), batch_size=args.batch,
                                                 shuffle=True)
            theirs = estimate_learning_coeff_with_summary(
                model, loader, evaluate=their_loss, sampling_method=SGLD,
                optimizer_kwargs=dict(lr=sgld.epsilon, localization=sgld.gamma, nbeta=nbeta),
                num_chains=args.chains, num_draws=args.draws, seed=seed, device="cpu", verbose=False)
            common = {"workload": name, "seed": seed, "chains": args.chains, "draws": args.draws}
            rows += [{**common, "estimator": "ours", "llc_mean": ours.llc_mean, "llc_std": ours.llc_std},
                     {**common, "estimator": theirs_name, "llc_mean": float(theirs["llc/mean"]),
                      "llc_std": float(theirs["llc/std"])}]
            with atomic_path(AGREEMENT_PATH) as tmp:  # after every seed, so an interrupted run resumes
                pd.DataFrame(rows, columns=AGREEMENT_COLUMNS).to_csv(tmp, index=False)
    print(pd.read_csv(AGREEMENT_PATH).groupby(["workload", "estimator"])["llc_mean"].agg(["count", "mean", "sem"]))


if __name__ == "__main__":
    main()
