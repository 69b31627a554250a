"""Priority: the base value of placing a gang, weighted by its band.

Bands are the distinct (queue priority, job priority) pairs, highest first; queue
priority therefore orders strictly before job priority. A window that holds several bands
gives band ``b`` the weight ``base ** (bands below it)`` with ``base`` larger than any
band's total value (``Scoring.band_weight_base``), so the weighted sum is lexicographic;
when those weights would not fit comfortably in 64 bits the round is cut into one window
per band instead (``windows``), which is lexicographic by construction.

A gang's base value is ``VALUE`` per unit plus ``JOB_START`` for the job itself
(``score.JOB_START``: the average wait counts jobs, not GPUs).
"""

from __future__ import annotations

from federation.placement.cpsat.variables import Vars, Window
from federation.placement.score import JOB_START, VALUE


def add(w: Window, v: Vars) -> None:
    by_uid = {jc.uid: jc for jc in w.classes}
    for (k, _uid), x in v.x.items():
        jc = by_uid[k]
        v.objective.append((VALUE * jc.units + JOB_START, x, jc.band))
