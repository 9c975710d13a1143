"""``ssdlab run SUITE``: one parser per registered suite, in the registry's order; each
suite's command is :class:`ssdlab.cli.suite_cmd.SuiteCommand`."""

from __future__ import annotations

from typing import Any


def register(sub: Any) -> None:
    from ssdlab.cli import suite_cmd
    from ssdlab.suites import runnable
    parser = sub.add_parser(
        "run",
        help="run a test suite on a target",
        description="""Run a suite on a block device or a test file. Block devices are
        overwritten: ssdlab refuses unless --destroy-data is given.""",
    )
    suites = parser.add_subparsers(
        dest="suite", metavar="SUITE", required=True, parser_class=type(parser)
    )
    for suite in runnable():
        suite_cmd.register(suites, suite)
