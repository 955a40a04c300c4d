"""The loss-plateau chapter (Gopalani et al.): the MWS transformer and tasks, their metrics and milestones, the
probe, the training setups, the other tasks, λ̂ across the plateau; ``presets`` and ``claims``."""
