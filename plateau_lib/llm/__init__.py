"""The Pythia/OLMo-2 chapter (Gopalani et al. Figs. 8, 23-25): the offline corpus, real and miniature checkpoints,
the collapse-and-repetition analysis and its page; ``presets`` and ``claims``."""
