"""plateau_lib: the thin library behind the plateau companion book.

Modules: ``model`` (the paper's GPT), ``tasks`` (algorithmic tasks), ``train`` (one online training
loop), ``metrics`` (every chapter metric), ``stages`` (plateau/jump detection), ``cache`` (result
cache with provenance), ``presets`` (paper vs cpu configs), ``plots`` (seaborn figures),
``llc`` (SGLD local learning coefficient), ``widgets`` and ``report`` (book helpers).
"""
