"""``federation serve`` flags for the input limits (docs/design/limits.md).

One flag per ``Limits`` field, named after it (``max_replicas_per_task`` ->
``--max-replicas-per-task``), so a new limit is configurable the moment it exists and
the flag, the field and the document cannot disagree on a name. Defaults are ``Limits``'s.
"""

from __future__ import annotations

import argparse
from dataclasses import fields

from federation.cli.numbers import integer_flag
from federation.wire.limits import DEFAULT_LIMITS, Limits


def add_limit_flags(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("input limits", "bounds on every request and snapshot "
                                                      "(docs/design/limits.md); refusals are INVALID_ARGUMENT")
    for f in fields(Limits):
        group.add_argument(f"--{f.name.replace('_', '-')}", dest=f"limit_{f.name}", type=integer_flag(1),
                           default=getattr(DEFAULT_LIMITS, f.name), metavar="N",
                           help=f"default {getattr(DEFAULT_LIMITS, f.name)}")


def limits_from_args(args: argparse.Namespace) -> Limits:
    return Limits(**{f.name: getattr(args, f"limit_{f.name}", getattr(DEFAULT_LIMITS, f.name))
                     for f in fields(Limits)})
