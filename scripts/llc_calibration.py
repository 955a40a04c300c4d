"""The LLC page's calibration with chains long enough to meet its criteria (plateau_lib.plateau.llc_transformer.
LONG_CALIBRATION), on the page's cpu transformer, resuming from the cells an interrupted run kept; committed to
results/ when it is finished.

    OMP_NUM_THREADS=1 python scripts/llc_calibration.py --budget-s 1800     # about 15 min on one core
"""
import argparse
import time

import torch

from plateau_lib.llc import calibration, presets
from plateau_lib.plateau import llc_transformer


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--budget-s", type=float, required=True, help="seconds of work before stopping (cells kept)")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    settings = presets.llc_page("cpu")
    table, _ = llc_transformer.long_calibration(settings, compute=True, deadline=time.time() + args.budget_s)
    print(calibration.criteria(table).drop(columns=["llc_mean"]).to_string(index=False))
    print(f"committed to {llc_transformer.long_calibration_table(settings).commit()}")


if __name__ == "__main__":
    main()
