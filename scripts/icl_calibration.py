"""The sampling guide's calibration on Hoogland et al.'s model at one checkpoint (plateau_lib.icl.diagnosis.
STAGES_CALIBRATION: seed 1 at step 40,292, a grid of ε and nβ around the paper's, 2 chains x 1,000 draws a cell),
resuming from the cells an interrupted run kept; committed to results/ when it is finished, with the MALA
acceptance that the minibatch noise allows there (diagnosis.mala_ceilings, seconds).

    OMP_NUM_THREADS=1 python scripts/icl_calibration.py --budget-s 3600     # about 30 min on one free core
"""
import argparse
import time

from plateau_lib.engine.train import Stopped
from plateau_lib.engine.utils import cpu_threads
from plateau_lib.icl import diagnosis
from plateau_lib.llc import calibration


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--budget-s", type=float, required=True, help="seconds of work before stopping (cells kept)")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    args = parser.parse_args(argv)
    cpu_threads(1)
    try:
        found = diagnosis.stages_calibration(compute=True, deadline=time.time() + args.budget_s,
                                             progress=not args.no_progress)
    except Stopped as stop:
        print(f"stopped: {stop}; run again to resume")
        return
    print(calibration.criteria(found[0]).drop(columns=["llc_mean"]).to_string(index=False))
    print(f"committed to {diagnosis.calibration_stored().commit()}")
    ceilings, _ = diagnosis.mala_ceilings(compute=True)
    print(ceilings.to_string(index=False))
    print(f"committed to {diagnosis.mala_ceilings_stored().commit()}")


if __name__ == "__main__":
    main()
