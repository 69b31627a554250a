"""``fedctl``'s tables and blocks show other parties' free text escaped, never raw.

A cancel reason (any tenant's) or a container's termination message (relayed by an agent)
reached an operator's terminal as is: ``ESC [2J`` cleared the screen, ``ESC ] 0;…`` set
its title, and a newline forged a line of output in ``watch`` or ``get job``.
"""

from __future__ import annotations

import pytest

from federation.cli import fedctl_format as fmt
from federation.v1 import jobs_pb2

HOSTILE = "bye\x1b[2J\x1b]0;owned\x07\nFAKE: job/x succeeded\x85"
SHOWN = "bye\\x1b[2J\\x1b]0;owned\\x07\\nFAKE: job/x succeeded\\x85"


def _job() -> jobs_pb2.Job:
    job = jobs_pb2.Job(id="j", reason=HOSTILE, message=HOSTILE, state=jobs_pb2.JOB_STATE_CANCELLED)
    job.spec.queue = "q"
    return job


@pytest.mark.parametrize("render", [
    pytest.param(lambda: fmt.job_block(_job()), id="get job"),
    pytest.param(lambda: fmt.event_line(jobs_pb2.JobEvent(event_id=3, job=_job(), message=HOSTILE)), id="watch"),
    pytest.param(lambda: fmt.explain_block(jobs_pb2.ExplainJobResponse(name="j", message=HOSTILE)), id="explain"),
])
def test_free_text_is_escaped(render: object) -> None:
    assert callable(render)
    out = render()
    assert SHOWN in out and "\x1b" not in out and "\x07" not in out and "\x85" not in out
    assert not any(line.startswith("FAKE") for line in out.splitlines())


def test_table_cells_are_escaped_and_plain_text_is_untouched() -> None:
    out = fmt.jobs_table([_job()])
    assert "\x1b" not in out and len(out.splitlines()) == 2
    assert fmt.printable("日本語 é, tabs\tand all") == "日本語 é, tabs\\tand all"
    assert fmt.printable("plain") == "plain"
