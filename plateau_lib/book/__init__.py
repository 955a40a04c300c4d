"""What the book's pages share: ``pages`` (setup, tidy frames, verdict tables, provenance), ``plots``, ``widgets``,
``verdicts`` (the Claim rule), ``summaries`` (the Reproducibility table), ``run`` (the strict papermill runner),
``params`` (parameter checks) and ``benchmarks`` (speed records). It imports the engine, never a chapter."""
