"""λ̂ of the LLC page's deep linear networks (plateau_lib.llc.dln.DLN_CASES) with both samplers, case by case, at
the sweep's step sizes and at a third of them (DLN_SMALL_EPSILON), then the checks on the two smallest (DLN_CHECKS)
and on the largest, then the γ scan (every size at three γ, with chains long enough to settle: DLN_GAMMAS) and the
largest network settled at a third of its step (DLN_FINER), then the γ scan with RMSProp-SGLD
(DLN_SETTLE_RMSPROP), resuming from the rows an interrupted run kept; each
table is committed to results/ when it is finished.

    OMP_NUM_THREADS=1 python scripts/llc_dln.py --budget-s 3600     # sweeps and checks about 70 min on one core,
                                                                    # the γ scan about 45 more, DLN_FINER 60,
                                                                    # the RMSProp-SGLD γ scan about 50
"""
import argparse
import time

import torch

from plateau_lib.llc import dln


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--budget-s", type=float, required=True, help="seconds of work before stopping (rows kept)")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    deadline = time.time() + args.budget_s
    for epsilon in (dln.DLN_EPSILON, dln.DLN_SMALL_EPSILON):
        rows = dln.dln_estimates(epsilon=epsilon, compute=True, deadline=deadline)
        print(dln.dln_summary(rows).to_string(index=False))
        print(f"committed to {dln.dln_table(epsilon=epsilon).commit()}")
    for large in (False, True):
        checks = dln.dln_check_estimates(large, compute=True, deadline=deadline)
        print(dln.dln_check_summary(checks).to_string())
        print(f"committed to {dln.dln_check_table(large).commit()}")
    windows = dln.dln_gamma_estimates(compute=True, deadline=deadline)
    print(dln.gamma_summary(windows).to_string(index=False))
    print(f"committed to {dln.dln_gamma_table().commit()}")
    windows = dln.finer_estimates(compute=True, deadline=deadline)
    print(dln.gamma_summary(windows).to_string(index=False))
    print(f"committed to {dln.finer_table().commit()}")
    windows = dln.rmsprop_gamma_estimates(compute=True, deadline=deadline)
    print(dln.gamma_summary(windows).to_string(index=False))
    print(f"committed to {dln.rmsprop_gamma_table().commit()}")


if __name__ == "__main__":
    main()
