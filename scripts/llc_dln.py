"""λ̂ of the LLC page's deep linear networks (plateau_lib.llc.dln.DLN_CASES) with both samplers, case by case, at
the sweep's step sizes and at a third of them (DLN_SMALL_EPSILON), then the checks on the two smallest (DLN_CHECKS)
and on the largest, then each settling scan of DLN_SCANS in turn (chains long enough to settle), resuming from the
rows an interrupted run kept; each table is committed to results/ when it is finished, and a table already stored
is read, not computed again.

    OMP_NUM_THREADS=1 python scripts/llc_dln.py --budget-s 3600     # sweeps and checks about 70 min on one core,
                                                                    # the scans about 45, 60, 70, 60 and 2 more
    OMP_NUM_THREADS=1 python scripts/llc_dln.py --budget-s 9000 --scans "true rank"   # only these scans

A scan the budget stops keeps its rows so far in results/in_progress/llc_dln_gamma-<key>/rows.csv (commit it before
the session ends); the next run takes them up.
"""
import argparse
import time

import torch

from plateau_lib.engine.train import Stopped
from plateau_lib.llc import dln


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--budget-s", type=float, required=True, help="seconds of work before stopping (rows kept)")
    parser.add_argument("--scans", nargs="+", default=None, choices=list(dln.DLN_SCANS), metavar="NAME",
                        help=f"only these settling scans, nothing else (one of {list(dln.DLN_SCANS)})")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    deadline = time.time() + args.budget_s
    if args.scans:
        return run_scans(args.scans, deadline)
    for epsilon in (dln.DLN_EPSILON, dln.DLN_SMALL_EPSILON):
        rows = dln.dln_estimates(epsilon=epsilon, compute=True, deadline=deadline)
        print(dln.dln_summary(rows).to_string(index=False))
        print(f"committed to {dln.dln_table(epsilon=epsilon).commit()}")
    for large in (False, True):
        checks = dln.dln_check_estimates(large, compute=True, deadline=deadline)
        print(dln.dln_check_summary(checks).to_string())
        print(f"committed to {dln.dln_check_table(large).commit()}")
    run_scans(dln.DLN_SCANS, deadline)


def run_scans(names, deadline: float) -> None:
    """Each settling scan of ``names`` in turn, each table committed to results/ when it is finished. A scan stopped
    by the budget keeps its rows so far in results/in_progress/ (commit them), and the next run resumes from them."""
    for name in names:
        table = dln.scan_table(name)
        if time.time() > deadline:
            print(f"budget spent before {name}", flush=True)
            return
        if table.load() is None:
            print(f"{name}: resuming from {table.restore_rows()} rows", flush=True)
        try:
            windows = dln.scan_estimates(name, compute=True, deadline=deadline)
        except Stopped as stop:
            print(stop, f"; rows so far kept in {table.carry_rows()}: commit them", sep="", flush=True)
            return
        print(name, dln.gamma_summary(windows, by=("case",)).to_string(index=False), sep="\n")
        print(f"committed to {table.commit()}")
        table.drop_carried_rows()


if __name__ == "__main__":
    main()
