"""Report pages of the suites besides PTS, registered by test kind.

``run_pages`` renders a test whose kind is in :data:`ssdlab.report.run_pages.SUITE_PAGES`
with that function; this module fills the table (``build`` imports it).
"""

from __future__ import annotations

from ssdlab.report import (
    block_preset_pages,
    file_presets_pages,
    latency_iops_pages,
    op_sweep_pages,
    saturation_pages,
    verify_pages,
)
from ssdlab.report.run_pages import SUITE_PAGES

SUITE_PAGES["wsat"] = saturation_pages.wsat_pages
SUITE_PAGES["hir"] = saturation_pages.hir_pages
SUITE_PAGES["latency-iops"] = latency_iops_pages.latency_iops_pages
SUITE_PAGES["op-sweep"] = op_sweep_pages.op_sweep_pages

SUITE_PAGES["verify"] = verify_pages.verify_pages
SUITE_PAGES["cdm"] = block_preset_pages.cdm_pages
SUITE_PAGES["atto"] = block_preset_pages.atto_pages
SUITE_PAGES["iometer"] = block_preset_pages.iometer_pages
SUITE_PAGES["aja"] = file_presets_pages.file_preset_pages
SUITE_PAGES["diskfill"] = file_presets_pages.file_preset_pages
SUITE_PAGES["smallfiles"] = file_presets_pages.file_preset_pages
SUITE_PAGES["copy"] = file_presets_pages.file_preset_pages

__all__ = ["SUITE_PAGES"]
