"""The fan-out benchmark reads server-side quantiles from two scrapes of a Prometheus
histogram (``federation.bench.fanout.histogram_quantile``), as ``histogram_quantile`` does."""

from __future__ import annotations

import math

import pytest

from federation.bench.fanout import histogram_quantile

INF = math.inf
BEFORE = [(0.001, 5.0), (0.01, 5.0), (0.1, 5.0), (INF, 5.0)]  # 5 observations from an earlier phase


@pytest.mark.parametrize(("after", "q", "expected"), [
    pytest.param([(0.001, 5.0), (0.01, 15.0), (0.1, 15.0), (INF, 15.0)], 0.5, 0.0055,
                 id="ten new observations in (1 ms, 10 ms]: the median is halfway, earlier ones ignored"),
    pytest.param([(0.001, 5.0), (0.01, 14.0), (0.1, 15.0), (INF, 15.0)], 0.99, 0.091,
                 id="one slow observation in (10 ms, 100 ms]: p99 interpolates inside it"),
    pytest.param([(0.001, 5.0), (0.01, 5.0), (0.1, 5.0), (INF, 7.0)], 0.5, 0.1,
                 id="beyond the last finite bound: that bound"),
    pytest.param(BEFORE, 0.5, 0.0, id="nothing observed between the scrapes: 0"),
])
def test_quantiles_between_two_scrapes(after: list[tuple[float, float]], q: float, expected: float) -> None:
    assert histogram_quantile(q, BEFORE, after) == pytest.approx(expected)
