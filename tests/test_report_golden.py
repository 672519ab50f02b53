"""Golden files: fixed hand-built plans rendered into every text artifact.

Regenerate after an intended change with ``LAYOUTOPT_UPDATE_GOLDEN=1 pytest tests/test_report_golden.py``
and review the diff. Plots are checked in test_report_plots.py (their bytes depend on matplotlib).
"""

from __future__ import annotations

import os
import shutil

import pytest

from layoutopt.report.emit import render
from test_report_helpers import GOLDEN, MODEL_IDS, PLAN_NAMES, fixture_plan

UPDATE = os.environ.get("LAYOUTOPT_UPDATE_GOLDEN") == "1"
CASES = [(name, engine) for name in PLAN_NAMES for engine in ("vllm", "sglang")]


@pytest.mark.parametrize(("name", "engine"), CASES)
def test_rendered_artifacts_match_golden(name, engine):
    plan = fixture_plan(name)
    files = render(plan, engine=engine, model_id=MODEL_IDS[plan.model], namespace="llm")
    texts = {path: content for path, content in files.items() if not path.startswith("plots/")}
    assert all(isinstance(content, str) for content in texts.values())
    golden_dir = GOLDEN / name / engine
    if UPDATE:
        shutil.rmtree(golden_dir, ignore_errors=True)
        for path, content in texts.items():
            (golden_dir / path).parent.mkdir(parents=True, exist_ok=True)
            (golden_dir / path).write_text(content)
    stored = sorted(str(p.relative_to(golden_dir)) for p in golden_dir.rglob("*") if p.is_file())
    assert stored == sorted(texts), "set of artifacts changed; regenerate with LAYOUTOPT_UPDATE_GOLDEN=1"
    for path, content in texts.items():
        assert content == (golden_dir / path).read_text(), f"{name}/{engine}/{path} differs from golden"


@pytest.mark.parametrize("name", PLAN_NAMES)
def test_rendering_is_deterministic(name):
    plan = fixture_plan(name)
    first = render(plan, model_id=MODEL_IDS[plan.model], plots=False)
    second = render(plan, model_id=MODEL_IDS[plan.model], plots=False)
    assert first == second
    assert list(first) == sorted(first)
