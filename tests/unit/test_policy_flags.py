"""The planning-policy flags (``--preemption-grace``, ``--topology-wait``, the holds and gates) on serve,
demo and bench."""

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
    assert limits.gang_hold_after_seconds == PlanLimits().gang_hold_after_seconds
    assert limits.enqueue_overcommit == PlanLimits().enqueue_overcommit
    assert limits.tier_reserve_after_seconds == PlanLimits().tier_reserve_after_seconds
    assert limits.wide_order_after_seconds == PlanLimits().wide_order_after_seconds == 0.0


@pytest.mark.parametrize(("grace", "expected"), [("never", None), ("NEVER", None), ("0", 0.0), ("600", 600.0)])
def test_grace_values(grace: str, expected: float | None) -> None:
    args = _parser().parse_args(["serve", "--preemption-grace", grace, "--topology-wait", "0",
                                 "--reserve-after", grace, "--hold-gangs-after", grace, "--reserve-tier-after", grace,
                                 "--order-wide-gangs-after", grace])
    limits = policy_limits(args, PlanLimits(time_limit_seconds=2.5))
    assert limits.preemption_grace_seconds == expected
    assert limits.topology_wait_seconds == 0.0
    assert limits.reserve_after_seconds == expected
    assert limits.gang_hold_after_seconds == expected
    assert limits.tier_reserve_after_seconds == expected
    assert limits.wide_order_after_seconds == expected
    assert limits.time_limit_seconds == 2.5  # the base's other fields are kept


@pytest.mark.parametrize(("flag", "value"), [("--preemption-grace", "soon"), ("--preemption-grace", "-1"),
                                             ("--preemption-grace", "nan"), ("--topology-wait", "never"),
                                             ("--topology-wait", "-5"), ("--reserve-after", "later"),
                                             ("--hold-gangs-after", "-3"), ("--reserve-tier-after", "soon"),
                                             ("--order-wide-gangs-after", "later"),
                                             ("--enqueue-overcommit", "0.5"),
                                             ("--enqueue-overcommit", "lots")])
def test_bad_values_exit_2_naming_the_flag(flag: str, value: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["bench", "--scenario", "x.yaml", flag, value])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert flag in err and value in err


@pytest.mark.parametrize(("value", "expected"), [("never", None), ("1.2", 1.2), ("1", 1.0)])
def test_enqueue_overcommit_values(value: str, expected: float | None) -> None:
    limits = policy_limits(_parser().parse_args(["bench", "--scenario", "x.yaml", "--enqueue-overcommit", value]))
    assert limits.enqueue_overcommit == expected
