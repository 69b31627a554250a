"""DURATION flags (``--audit-retention``): the units operators write, nothing guessed."""

from __future__ import annotations

import pytest

from federation.cli.durations import parse_duration
from federation.cli.main import main


@pytest.mark.parametrize("text, seconds", [
    ("90s", 90), ("15m", 900), ("12h", 43_200), ("30d", 2_592_000), ("1w", 604_800), ("1d12h", 129_600),
    (" 2H ", 7200),
], ids=["seconds", "minutes", "hours", "days", "weeks", "sum", "case-and-spaces"])
def test_durations_in_operator_units(text: str, seconds: float) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["30", "", "1.5h", "-1d", "1y", "d", "1d 2h"],
                         ids=["bare-number", "empty", "fraction", "negative", "years", "no-number", "inner-space"])
def test_anything_else_is_refused(text: str) -> None:
    with pytest.raises(ValueError, match="is not a duration"):
        parse_duration(text)


@pytest.mark.parametrize("value, says", [("30", "is not a duration"), ("10s", "between 60s and 10 years"),
                                         ("5000w", "between 60s and 10 years")],
                         ids=["bare-number", "too-short", "too-long"])
def test_serve_refuses_a_bad_retention_with_exit_2(value: str, says: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["serve", "--audit-retention", value])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert "--audit-retention" in err and says in err
