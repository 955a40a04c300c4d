"""Compute the stored untrained baselines of the in-context regression chapter and copy them into results/ to
commit: λ̂ of Hoogland et al.'s untrained model (about 17 CPU-minutes) and the paper sweep of Carroll et al. and
Raventós et al. never trained (12 models, about 13 CPU-minutes). The other chapters' baselines are computed where
they are used (``plateau_lib.chapters.untrained_values``: the tests and the Reproducibility page).

    OMP_NUM_THREADS=1 python scripts/untrained_baselines.py
"""
from plateau_lib.engine.utils import cpu_threads
from plateau_lib.icl import untrained


def main() -> None:
    cpu_threads()
    row = untrained.untrained_llc(compute=True)
    print(f"λ̂ of the untrained model: {float(row['llc_mean'].iloc[0]):.2f}",
          untrained.llc_table().commit())
    untrained.sweep_values(compute=True)
    print("the untrained sweep:", untrained.sweep_table().commit())


if __name__ == "__main__":
    main()
