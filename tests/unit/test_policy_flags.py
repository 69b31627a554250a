"""``--preemption-grace`` and ``--topology-wait`` on serve, demo and bench."""

from __future__ import annotations

import pytest

from federation.cli.main import _parser, main
from federation.cli.policy_flags import policy_limits
from federation.domain.plans import PlanLimits


@pytest.mark.parametrize("command", [["serve"], ["demo"], ["bench", "--scenario", "x.yaml"]])
def test_defaults_are_plan_limits_defaults(command: list[str]) -> None:
    limits = policy_limits(_parser().parse_args(command))
    assert limits.preemption_grace_seconds == PlanLimits().preemption_grace_seconds
    assert limits.topology_wait_seconds == PlanLimits().topology_wait_seconds
    assert limits.reserve_after_seconds == PlanLimits().reserve_after_seconds


@pytest.mark.parametrize(("grace", "expected"), [("never", None), ("NEVER", None), ("0", 0.0), ("600", 600.0)])
def test_grace_values(grace: str, expected: float | None) -> None:
    args = _parser().parse_args(["serve", "--preemption-grace", grace, "--topology-wait", "0",
                                 "--reserve-after", grace])
    limits = policy_limits(args, PlanLimits(time_limit_seconds=2.5))
    assert limits.preemption_grace_seconds == expected
    assert limits.topology_wait_seconds == 0.0
    assert limits.reserve_after_seconds == expected
    assert limits.time_limit_seconds == 2.5  # the base's other fields are kept


@pytest.mark.parametrize(("flag", "value"), [("--preemption-grace", "soon"), ("--preemption-grace", "-1"),
                                             ("--preemption-grace", "nan"), ("--topology-wait", "never"),
                                             ("--topology-wait", "-5"), ("--reserve-after", "later")])
def test_bad_values_exit_2_naming_the_flag(flag: str, value: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["bench", "--scenario", "x.yaml", flag, value])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert flag in err and value in err
