"""Hypothesis runs derandomized by default, so the suite (and CI) sees the same examples on every run:
a property that fails does so every time, not one run in fifty. Set HYPOTHESIS_PROFILE=explore for
fresh random examples when hunting for new counterexamples (then add what it finds as an example)."""

from __future__ import annotations

import os

from hypothesis import settings

settings.register_profile("repeatable", derandomize=True)
settings.register_profile("explore", derandomize=False)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "repeatable"))
