"""The submission benchmark's CPU and batch accounting (``federation.bench.submit_cpu``)."""

from __future__ import annotations

import os

from federation.bench.submit_cpu import cpu_seconds, jobs_per_transaction


def test_the_mean_batch_is_read_from_the_server_log() -> None:
    log = "x INFO federation.service.jobs: submissions: 600 jobs in 20 store transactions (30.0 per transaction)\n"
    assert jobs_per_transaction(log) == 30.0


def test_a_log_without_the_line_has_no_mean_batch() -> None:
    assert jobs_per_transaction("federation: stopped\n") is None


def test_cpu_seconds_of_this_process_and_of_no_process() -> None:
    sum(i * i for i in range(200_000))  # spend a little CPU
    assert cpu_seconds(os.getpid()) > 0.0
    assert cpu_seconds(2**22 + 12345) == 0.0  # beyond Linux's pid limit: no such process
