"""The service takes a profile by content in the request body (never a server path)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from layoutopt.service import BackgroundServer, ServiceSettings, create_app
from test_service import request

FIXTURES = Path(__file__).parent / "fixtures" / "calibrate"
ESTIMATE = {"model": "qwen3-32b", "gpu": "H100", "isl": 1024, "osl": 128, "layout": {"tp_size": 4},
            "concurrency": 16}


@pytest.fixture(scope="module")
def profile_body(tmp_path_factory) -> dict:
    """A small profile: the built-in vllm constants with a lower HBM efficiency."""
    from layoutopt.calibrate.fitting import calibrate_cases
    from layoutopt.calibrate.ingest import ingest

    cases = ingest([FIXTURES / "h100_vllm_qwen3_32b_tp4.csv"]).cases
    fitted = calibrate_cases(cases, "vllm", parameters=("memory_efficiency",), folds=0).profile
    body = yaml.safe_load(yaml.safe_dump(fitted.model_dump(mode="json")))
    body["constants"]["memory_efficiency"] = 0.5
    body["fitted"] = []
    return body


def test_estimate_with_a_profile_by_content(profile_body):
    with BackgroundServer(create_app(ServiceSettings(max_workers=1))) as server:
        status, builtin = request(server.url + "/v1/estimate", "POST", ESTIMATE)
        assert status == 200 and builtin["error_band"]["basis"].startswith("built-in vllm profile")
        status, tuned = request(server.url + "/v1/estimate", "POST", {**ESTIMATE, "profile": profile_body})
        assert status == 200, tuned
        assert tuned["tpot_ms"]["mean"] > 1.2 * builtin["tpot_ms"]["mean"]
        assert tuned["error_band"]["basis"].startswith("in-sample residuals")
        status, payload = request(server.url + "/v1/estimate", "POST", {**ESTIMATE, "profile": "/etc/profile.yaml"})
        assert status == 422 and payload["detail"][0]["loc"][:2] == ["body", "profile"]
        bad = {**profile_body, "constants": {**profile_body["constants"], "memory_efficiency": 2.0}}
        status, payload = request(server.url + "/v1/estimate", "POST", {**ESTIMATE, "profile": bad})
        assert status == 422 and "memory_efficiency" in str(payload["detail"])
