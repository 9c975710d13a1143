"""The example suite of docs/adding-a-suite.md (tests/support/example_suite), registered
by the document's one line as tests/integration/test_example_suite_real.py registers it,
is a suite like the registered ones, checked without fio: the contract checks
tests/unit/test_suites.py runs for every registered suite, the checks of the golden stores
on its own golden run (tests/fixtures/store/example.sqlite), and its ``--help`` as
docs/cli.md would show it (tests/fixtures/example_suite/cli-section.md); and the document
shows its registry line and its three modules as they are."""

from __future__ import annotations

import io
import re
from pathlib import Path

import pytest

from ssdlab import suites
from ssdlab.store.export import write_export
from ssdlab.suites import SUITES, Suite, result_json
from tests.support import suite_contract as contract
from tests.support.example_suite import LINE, plan, registered
from tests.support.golden import EXAMPLE_STORE, FIXTURES, load_golden_runs
from tests.unit.test_store_records_golden import (
    check_document,
    check_shared_details,
    check_suite_documents,
)
from tools.gen_cli_doc import render

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "adding-a-suite.md"
CLI_SECTION = ROOT / "tests" / "fixtures" / "example_suite" / "cli-section.md"


@pytest.fixture
def example(monkeypatch: pytest.MonkeyPatch) -> Suite:
    """The example suite, registered by the document's line (for this test only)."""
    monkeypatch.setattr(suites, "SUITES", registered())
    suite = suites.find(plan.SUITE)
    assert suite is not None and suite.spec is plan.SPEC
    return suite


def test_the_line_adds_the_suite_to_the_registry(example: Suite) -> None:
    assert (*SUITES, example) == suites.SUITES
    assert plan.SUITE not in {s.name for s in SUITES}, "its name is a registered suite's"
    assert example.spec.runnable and example.spec.demo_args is None  # one suite is the demo's


def test_its_parts_are_what_the_contract_asks_for(example: Suite) -> None:
    """test_suites.py's checks: the spec complete, the options fill the arguments, a
    command line of its options makes them, the runner complete, pages and show lines for
    its test, ``ssdlab run example-read`` on the command line."""
    contract.check_spec(example)
    contract.check_options_fill_the_arguments(example)
    contract.check_a_command_line_makes_the_arguments(example)
    contract.check_runner(example)
    contract.check_pages(example)
    assert plan.SUITE in contract.run_commands()


def test_its_golden_run_is_its_declared_records(
        example: Suite, tmp_path_factory: pytest.TempPathFactory) -> None:
    """example.sqlite (record.sh's last step) holds a run of it: every document is the
    record the example's spec declares (or a shared one), and the export is byte for byte
    the one recorded with it."""
    (run,) = load_golden_runs(tmp_path_factory, (EXAMPLE_STORE,))
    assert run.suite == plan.SUITE and [t.name for t in run.tests] == [plan.TEST]
    check_suite_documents(run, example.spec)  # the plan, params, verdicts and cells
    assert check_shared_details(run) >= {"process"}
    for test in run.tests:
        assert test.rounds and test.rounds[0].cells, "a round of cells to check"
        result = example.spec.result_type(test.name)
        assert result is not None, test.name
        check_document(result, test.result, f"{run.suite} {test.name} result")
    out = io.StringIO()
    write_export(run, "json", out, result_json)
    assert out.getvalue() == (FIXTURES / f"{run.run_id}.json").read_text(encoding="utf-8")


def test_its_help_is_what_docs_cli_md_would_show(
        example: Suite, monkeypatch: pytest.MonkeyPatch) -> None:
    """tools/gen_cli_doc.py's docs/cli.md, with the example registered, has its section:
    the one a new suite adds (docs/adding-a-suite.md, step 5)."""
    monkeypatch.setenv("COLUMNS", "100")  # render() sets it: put back after the test
    found = re.search(r"^#### ssdlab run example-read\n.*?(?=^#)", render(), re.M | re.S)
    assert found is not None, "no section of ssdlab run example-read"
    assert found.group(0).rstrip("\n") + "\n" == CLI_SECTION.read_text(encoding="utf-8")


def test_the_document_shows_the_registry_line_and_the_three_modules() -> None:
    doc = DOC.read_text(encoding="utf-8")
    assert LINE in doc
    for part in ("plan", "run", "pages"):
        source = (Path(plan.__file__).parent / f"{part}.py").read_text(encoding="utf-8")
        assert source in doc, f"docs/adding-a-suite.md does not show {part}.py as it is"
