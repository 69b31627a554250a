"""The CP-SAT placement model (the only package that imports ortools).

Structure — variables in one module, one module per constraint or objective term:

=============== =====================================================================
``classes``      identical jobs aggregated into classes; candidate domains per class
``variables``    x[class, domain] counts, p[class, domain, node, task] (exact mode),
                 e[victim] evictions, r[queue, band] fair-share credits
``assignment``   each job at most once, a gang = one unit of x (never spans domains)
``capacity``     per-node (exact) or per-domain aggregate + GPU-slot (relaxed) room
``quota``        queue capability caps; other queues' unused guarantees never lent
``fairness``     credit for units that fill a queue's DRF fair-share deficit
``priority``     base value per placed unit, weighted by priority band
``topology``     hard tier limits prune candidates; penalty per tier above the lowest
``fit``          best-fit packing preference (the domain the job leaves fullest)
``anticipation`` whole room above the chosen domain kept for queued gangs (``guard``)
``preference``   preferred node affinity of the domain's nodes, below one tier step
``preemption``   who may be evicted (preempt within a queue, reclaim across queues),
                 linking to the beneficiaries, cost of victims
``objective``    the sum of all terms
``hint``         the greedy plan as a complete hint (AddHint)
``decode``       counts -> pods on nodes; repair of gangs that do not pack
``windows``      joint model for small rounds, one window per band for large ones
=============== =====================================================================

Objective layering (maximised; ``placement.score`` computes the same quantity for any
plan, so plans from different planners are comparable):

1. queue priority ≫ job priority — strict: bands are weighted lexicographically in a
   joint model, or decided one window at a time, highest band first;
2. fairness — ``FAIR_BONUS`` (256) per unit filling a queue's deficit below its fair share;
3. amount placed — ``VALUE`` (64) per unit (work conservation), minus evicted units, and
   ``JOB_START`` (16) per job started (the average wait counts jobs, not GPUs);
4. topology tier — ``TIER_PENALTY`` (16) per unit per tier above the lowest feasible;
5. anticipation and packing — up to ``GUARD_MAX`` (6) per unit for eating into emptier
   domains above the chosen one at a tier a queued gang needs, and up to
   ``PACK_PENALTY_MAX`` (7) for the room the job leaves in its chosen domain (together
   < one tier step).

Layers 2-5 dominate each other by weight ratios rather than strictly (strict weights
would need coefficients beyond what CP-SAT's LP handles well); the ratios make the
intended trade-off: a starved queue's gang beats a slightly bigger gang of a queue at its
share; a placement always beats leaving a gang pending; a tier always beats packing.
"""

from federation.placement.cpsat.windows import plan_cpsat

__all__ = ["plan_cpsat"]
