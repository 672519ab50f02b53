"""The package's own data files read through libyaml give the documents yaml.safe_load gives."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from layoutopt.io_safe import load_package_yaml

PACKAGE = Path(__file__).resolve().parents[1] / "layoutopt"
DATA_FILES = sorted(PACKAGE.rglob("*.yaml"))


def test_the_package_has_data_files():
    assert len(DATA_FILES) >= 10


@pytest.mark.parametrize("path", DATA_FILES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_package_yaml_reads_as_safe_load(path):
    text = path.read_text(encoding="utf-8")
    assert load_package_yaml(text) == yaml.safe_load(text)
