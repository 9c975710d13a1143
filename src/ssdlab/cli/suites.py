"""The suites of ``ssdlab run`` besides ``pts``, in the order ``--help`` lists them.

Each module has ``register(suites)`` (adds its ``ssdlab run SUITE`` parser) and, if its
runs can be continued, ``resume(run, args, argv) -> str``.
"""

from __future__ import annotations

from typing import Any

from ssdlab.cli import (
    atto_cmd,
    cdm_cmd,
    file_presets_cmd,
    iometer_cmd,
    latency_iops_cmd,
    op_sweep_cmd,
    saturation_cmd,
    verify_cmd,
)

#: one entry per line, sorted by suite name (several people add suites here)
MODULES: list[Any] = [
    atto_cmd,
    cdm_cmd,
    "curves",
    file_presets_cmd,
    iometer_cmd,
    latency_iops_cmd,
    op_sweep_cmd,
    "replay",
    saturation_cmd,
    "slc-probe",
    verify_cmd,
]
