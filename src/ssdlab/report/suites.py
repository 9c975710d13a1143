"""Report pages of the suites besides PTS, registered by test kind.

``run_pages`` renders a test whose kind is in :data:`ssdlab.report.run_pages.SUITE_PAGES`
with that function; this module fills the table (``build`` imports it).
"""

from __future__ import annotations

from ssdlab.report import curves_pages
from ssdlab.report.run_pages import SUITE_PAGES

SUITE_PAGES["curves"] = curves_pages.curves_pages
SUITE_PAGES["replay"] = curves_pages.replay_pages

__all__ = ["SUITE_PAGES"]
