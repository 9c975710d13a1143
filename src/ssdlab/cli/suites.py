"""The suites of ``ssdlab run`` besides ``pts``, in the order ``--help`` lists them.

Each module has ``register(suites)`` (adds its ``ssdlab run SUITE`` parser); a suite on
the suite contract is its name (:mod:`ssdlab.suites` has the rest).
"""

from __future__ import annotations

from typing import Any

from ssdlab.cli import (
    curves_cmd,
    replay_cmd,
)

#: one entry per line, in the order --help lists them (several people add suites here)
MODULES: list[Any] = [
    "pts",
    "atto",
    "cdm",
    curves_cmd,
    "aja",
    "diskfill",
    "smallfiles",
    "copy",
    "iometer",
    "latency-iops",
    "op-sweep",
    replay_cmd,
    "saturation",
    "slc-probe",
    "verify",
]
