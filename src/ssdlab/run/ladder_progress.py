"""Progress of a latency-vs-IOPS run: a curve stops when its rule says so, so how many
points are left is a range, and so is the ETA of the live line."""

from __future__ import annotations

import sys
from typing import TextIO

from ssdlab.plan.latency_iops import POINT_OVERHEAD_S
from ssdlab.run.progress import Progress
from ssdlab.units import format_duration


class LadderProgress(Progress):
    """Progress of a ladder run: log lines, and a live line whose ETA is a range."""

    def __init__(self, stream: TextIO | None = None, *, live: bool | None = None,
                 quick: bool = False, point_s: float = 35.0) -> None:
        super().__init__(stream or sys.stdout, live=live, quick=quick)
        self.point_s = point_s
        self.left: tuple[int, int] = (0, 0)  # (fewest, most) points still to run

    def _eta(self) -> str:
        per_point = self.point_s + POINT_OVERHEAD_S
        now = max(0.0, (self.state.planned_s or 0.0) - self.state.elapsed_s)
        low, high = (now + n * per_point for n in self.left)
        return f"{format_duration(low)}-{format_duration(high)}"
