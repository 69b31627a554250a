"""Placement: pure planning over immutable federation snapshots.

``plan(snapshot, limits, previous)`` is the CP-SAT planner (issue 3); ``validate`` checks
any plan against every hard rule; ``score`` computes the layered objective of any plan so
planners can be compared; ``greedy_plan`` is the complete greedy planner used as the
CP-SAT hint and fallback. This package never imports grpc, sqlalchemy or asyncio, and only
``placement.cpsat`` imports ortools.
"""

from federation.placement.greedy import greedy_plan
from federation.placement.planner import plan
from federation.placement.score import score, score_vector
from federation.placement.validate import validate

__all__ = ["greedy_plan", "plan", "score", "score_vector", "validate"]
