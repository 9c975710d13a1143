"""No suite is named in shared code: a suite's name is compared, looked up in the
registry, or held in a constant that some comparison uses only in that suite's own
modules (its spec's, run and pages modules, from the registry), with one listed
exception (tests/support/suite_names.py). What a suite can do is in its spec
(``remote``, ``report_title``, ``demo_args`` ...), never decided by its name.
"""

from __future__ import annotations

import ast

from tests.support.imports import REGISTRY, modules
from tests.support.suite_names import own_modules, suite_names


def _sources() -> dict[str, ast.Module]:
    """Every module of the package but the registry, parsed, by dotted name."""
    return {name: ast.parse(path.read_text(encoding="utf-8"))
            for name, path in modules().items() if name != REGISTRY}


def test_no_suite_is_named_in_shared_code() -> None:
    from ssdlab.suites import SUITES
    found = suite_names(_sources(), {s.name for s in SUITES}, own_modules())
    assert found == [], "\n".join(map(str, found))


def _parsed(sources: dict[str, str]) -> dict[str, ast.Module]:
    return {name: ast.parse(text) for name, text in sources.items()}


def test_the_names_checker_finds_the_five_patterns_of_84b2068() -> None:
    suites = {"pts", "db", "published", "replay", "matrix"}
    own = {"pts": {"ssdlab.plan.pts"}, "matrix": {"ssdlab.plan.matrix"}}
    found = suite_names(_parsed({
        # report/build.py: the title by the suite's name
        "ssdlab.report.build": 'kind = "x" if all(r.suite == "db" for r in runs) else "y"\n',
        # run/remote.py: the suites that run on other hosts
        "ssdlab.run.remote": 'REMOTE_SUITES = ("pts",)\n'
                             'def check(suite):\n    return suite in REMOTE_SUITES\n',
        # report/run_pages.py: the title page's table by a suite's word
        "ssdlab.report.run_pages": 'def t(kind):\n    if kind == "pts":\n        return 1\n',
        # cli/demo_cmd.py: the demo's suite looked up by name
        "ssdlab.cli.demo_cmd": 'from ssdlab.suites import find\nSUITE = find("pts")\n',
        # plan/matrix.py: the default child (the listed exception) and another default
        "ssdlab.plan.matrix": 'DEFAULT_CHILD = "pts"\nDEFAULT_OTHER = "db"\n',
        # the suite's own module may name itself; data keys and messages are not names
        "ssdlab.plan.pts": 'def f(s):\n    return s == "pts"\n',
        "ssdlab.report.figures": 'STATE = {"published": 1}\nprint("db")\n',
    }), suites, own)
    assert sorted((n.module, n.suite, n.how) for n in found) == sorted([
        ("ssdlab.report.build", "db", "compared"),
        ("ssdlab.run.remote", "pts", "REMOTE_SUITES, compared"),
        ("ssdlab.report.run_pages", "pts", "compared"),
        ("ssdlab.cli.demo_cmd", "pts", "looked up"),
        ("ssdlab.plan.matrix", "db", "DEFAULT_OTHER"),
    ])


def test_the_names_checker_sees_a_suites_constant_compared_where_it_is_imported() -> None:
    suites = {"peak", "db"}
    own = {"peak": {"ssdlab.plan.peak"}, "db": {"ssdlab.plan.db", "ssdlab.report.db_pages"}}
    found = suite_names(_parsed({
        "ssdlab.plan.peak": 'SUITE = "peak"\n',
        "ssdlab.plan.db": 'SUITE = "db"\n',
        # shared code comparing another suite's name under its own constant's name
        "ssdlab.run.shared": "from ssdlab.plan.db import SUITE as DB\n"
                             "def f(r):\n    return r.suite == DB\n",
        # the suite's own module may; imported and not compared is no use of the name
        "ssdlab.report.db_pages": "from ssdlab.plan.db import SUITE\n"
                                  "def g(r):\n    return r.suite != SUITE\n",
        "ssdlab.run.other": "from ssdlab.plan.peak import SUITE\nprint(SUITE)\n",
        # the listed exception: --threads auto --qd auto reads the peak suite's runs
        "ssdlab.run.peak_load": "from ssdlab.plan.peak import SUITE\n"
                                "def h(r):\n    return r.suite == SUITE\n",
    }), suites, own)
    assert [(n.module, n.suite, n.how) for n in found] == [
        ("ssdlab.run.shared", "db", "DB from ssdlab.plan.db, compared")]
