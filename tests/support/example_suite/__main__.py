"""``python -m tests.support.example_suite ARGS...`` (from the repository's root): ssdlab
with the example suite registered by the one line docs/adding-a-suite.md shows.
tests/fixtures/store/record.sh records the example's golden run with it."""

from __future__ import annotations

import sys

from ssdlab import suites
from ssdlab.cli.main import main
from tests.support.example_suite import registered

suites.SUITES = registered()
sys.exit(main())
