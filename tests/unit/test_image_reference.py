"""The image the Helm charts run is the one the repository builds: ``make image`` tags the
Dockerfile's build ``federation:<pyproject version>``, and both charts default to
``image.repository: federation`` with ``appVersion`` equal to that version."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]


def test_charts_reference_the_image_make_builds() -> None:
    version = re.search(r'^version = "([^"]+)"', (REPO / "pyproject.toml").read_text(), re.M)
    assert version is not None
    makefile = (REPO / "Makefile").read_text()
    assert "IMAGE ?= federation:$(VERSION)" in makefile and "docker build -t $(IMAGE) ." in makefile
    assert (REPO / "Dockerfile").is_file()
    for chart in ("federation-central", "federation-agent"):
        meta = yaml.safe_load((REPO / "deploy" / "chart" / chart / "Chart.yaml").read_text())
        values = yaml.safe_load((REPO / "deploy" / "chart" / chart / "values.yaml").read_text())
        assert meta["appVersion"] == version.group(1), chart
        assert values["image"]["repository"] == "federation" and values["image"]["tag"] == "", chart
