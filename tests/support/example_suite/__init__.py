"""The example suite of docs/adding-a-suite.md (``example-read``): its plan, run and pages
modules, and the one registry line that registers it."""

from __future__ import annotations

from ssdlab.suites import Suite
from tests.support.example_suite import plan as example

#: the registry line docs/adding-a-suite.md shows (a suite of ssdlab adds it to
#: ``SUITES`` in src/ssdlab/suites.py; the tests add it where they need the suite)
LINE = ('Suite(example.SPEC, "tests.support.example_suite.run", '
        '"tests.support.example_suite.pages"),')


def registered() -> tuple[Suite, ...]:
    """The registry with :data:`LINE` added, as the document adds it."""
    from ssdlab.suites import SUITES
    return (*SUITES, eval(LINE.rstrip(","), {"Suite": Suite, "example": example}))
