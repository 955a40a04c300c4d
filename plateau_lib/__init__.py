"""plateau_lib: the thin library behind the plateau companion book, one package per chapter.

- ``engine``: the one training loop, the task table, the result cache, sweeps, stage detection, trajectory PCA;
- ``llc``: the SGLD estimator of the local learning coefficient (and its Methods page);
- ``book``: page helpers, plots, widgets, the verdict rule, the Reproducibility summaries, the notebook runner;
- ``plateau``, ``llm``, ``icl``: the chapters (Gopalani et al.; Pythia/OLMo; in-context linear regression), each
  with its ``presets`` and ``claims``;
- ``chapters``: the registry the paper queue (``paper``) and the Reproducibility page read.
- ``commands``: every command line, ``python -m plateau_lib COMMAND`` (the library modules hold no argparse).
"""
