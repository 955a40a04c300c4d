"""Train the stages run's diagnosis variants (plateau_lib.icl.diagnosis) for a time budget, resuming from and saving
to results/in_progress/; commit that folder afterwards.

    OMP_NUM_THREADS=1 python scripts/icl_diagnosis.py --seeds 1 --budget-s 9000            # the retrain, one core
    OMP_NUM_THREADS=1 python scripts/icl_diagnosis.py --seeds 2 --operands bfloat16 --budget-s 9000
    python scripts/icl_diagnosis.py --seeds 0 1 2 3 4 --cuda-graphs --budget-s 400 --out /tmp/lease   # a GPU
    OMP_NUM_THREADS=1 python scripts/icl_diagnosis.py --seeds 0 --stream cuda --budget-s 9000   # a GPU's run, here
    OMP_NUM_THREADS=1 python scripts/icl_diagnosis.py --seeds 0 2 --stream cuda --llc-at 40292 --budget-s 3600
    OMP_NUM_THREADS=1 python scripts/icl_diagnosis.py --seeds 1 --llc-at 40292 318181 --as-run --budget-s 3600
    python scripts/icl_diagnosis.py --seeds 1 --llc-at 40292 318181 499999 --as-run --chains 10 --device cuda \
        --budget-s 400                                            # the authors' full budget, on a GPU
    OMP_NUM_THREADS=1 python scripts/icl_diagnosis.py --seeds 0 --stream cuda --llc-at 318181 --longer --budget-s 3600
"""
import argparse

from plateau_lib.engine.utils import cpu_threads
from plateau_lib.icl import diagnosis


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, nargs="+", default=[1], help="model seeds (default: 1)")
    parser.add_argument("--operands", choices=("float32", "bfloat16"), default="float32",
                        help="the matrix products' operands (default: float32)")
    parser.add_argument("--budget-s", type=float, required=True, help="seconds of work before saving")
    parser.add_argument("--llc-at", type=int, nargs="+", default=None,
                        help="instead of training: λ̂ at these kept checkpoint steps of the runs")
    parser.add_argument("--as-run", action="store_true",
                        help="with --llc-at: the estimator as the authors' code ran it (diagnosis.LLC_AS_RUN: 5,000 "
                             "draws from the first, n = 2^20), at 2 chains, instead of the stages page's budget")
    parser.add_argument("--chains", type=int, default=None,
                        help="with --llc-at: this many chains instead of the budget's (--as-run --chains 10: the "
                             "authors' full budget, for a GPU)")
    parser.add_argument("--device", default="cpu", help="with --llc-at: where the chains run (default cpu)")
    parser.add_argument("--longer", action="store_true",
                        help="with --llc-at: the stages run's budget check (diagnosis.LLC_LONGER: its chains 4x longer)")
    parser.add_argument("--stream", choices=("cpu", "cuda"), default=None,
                        help="the runs whose data a CPU or a GPU drew (default: this device's); training a GPU's "
                             "run here goes on with this device's data")
    parser.add_argument("--cuda-graphs", action="store_true", help="stacked steps from a CUDA graph (a GPU)")
    parser.add_argument("--compile", action="store_true", help="the stacked step through torch.compile")
    parser.add_argument("--out", default=None, help="save the states here instead of results/in_progress/")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    args = parser.parse_args(argv)
    cpu_threads()
    configs = [diagnosis.variant(s, args.operands) for s in args.seeds]
    if args.llc_at:
        if args.as_run and args.longer:
            parser.error("--as-run and --longer are two budgets: give one")
        llc = (diagnosis.LLC_AS_RUN if args.as_run else diagnosis.LLC_LONGER if args.longer
               else diagnosis.ICL_LLC_REDUCED)
        if args.chains is not None:
            if args.chains < 1:
                parser.error(f"--chains must be a positive integer, got {args.chains}")
            llc = llc.replace(num_chains=args.chains)
        diagnosis.llc_at([(c, args.stream or "cpu") for c in configs], args.llc_at, llc, budget_s=args.budget_s,
                         device=args.device)
        return
    for record in diagnosis.retrain(configs, args.budget_s, not args.no_progress, args.out, args.cuda_graphs,
                                    args.compile, args.stream):
        print(record["status"], record["step"], record.get("seconds_by_device"), flush=True)


if __name__ == "__main__":
    main()
