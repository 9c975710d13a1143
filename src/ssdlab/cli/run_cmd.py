"""``ssdlab run SUITE``: the suites' parsers; each suite's command is
:class:`ssdlab.cli.suite_cmd.SuiteCommand`."""

from __future__ import annotations

from typing import Any

from ssdlab.cli import suites as suite_modules


def register(sub: Any) -> None:
    parser = sub.add_parser(
        "run",
        help="run a test suite on a target",
        description="Run a suite on a block device or a test file. Block devices are "
        "overwritten: ssdlab refuses unless --destroy-data is given.",
    )
    suites = parser.add_subparsers(
        dest="suite", metavar="SUITE", required=True, parser_class=type(parser)
    )
    from ssdlab.cli import suite_cmd
    from ssdlab.suites import find, runnable
    for module in suite_modules.MODULES:
        if isinstance(module, str):
            registered = find(module)
            assert registered is not None, module
            suite_cmd.register(suites, registered)
        else:
            module.register(suites)
    listed = {m for m in suite_modules.MODULES if isinstance(m, str)}
    for suite in runnable():
        if suite.name not in listed:
            suite_cmd.register(suites, suite)
