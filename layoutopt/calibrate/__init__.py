"""``layoutopt calibrate``: fit an engine x GPU-generation profile to a user's own benchmarks.

- :mod:`.ingest`: measurement files (reference CSV, ``vllm bench serve`` JSON, aiperf /
  genai-perf exports) -> the perf model's ``MeasuredCase`` objects;
- :mod:`.fitting`: the fit (``perf_model.fit.fit_profile``), k-fold error, error bands;
- :mod:`.profile_file`: the profile YAML (schema, loader, atomic writer);
- :mod:`.apply`: a profile (or the built-in one) used by estimate and solve, and the error band
  each result reports.
"""
