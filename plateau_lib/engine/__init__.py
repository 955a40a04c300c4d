"""The ground every chapter stands on: the run's config and result (``runs``), the one training loop (``train``),
the task table (``tasks``), the result cache (``cache``), sweeps on any executor (``sweep``), stage detection
(``stages``), the joint trajectory PCA (``trajectory``), the preset helpers (``presets``) and ``utils``. It imports no
chapter."""
