"""``ssdlab emulator status`` and ``stop`` as a user reads them: the write amplification of
a drive the host has not written yet is not 0.0, a measured one is rounded, and stopping
an emulator that does not exist is a bad argument, not "no such run" (docs/exit-codes.md).
The real daemon's status is tested in tests/integration/test_emulator_cli.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from ssdlab.cli.emulator_cmd import write_amplification_text
from ssdlab.errors import ExitCode
from ssdlab.targets import emulator
from tests.support.cli import one_line_error, ssdlab_in_process


def test_a_drive_the_host_has_not_written_says_so() -> None:
    fresh = {"host_write_bytes": 0, "nand_write_bytes": 0, "write_amplification": 0.0}
    assert write_amplification_text(fresh) == "no host writes yet"


def test_a_measured_write_amplification_is_rounded_to_two_decimals() -> None:
    assert write_amplification_text({"host_write_bytes": 1 << 30,
                                     "write_amplification": 3.58424}) == \
        "write amplification 3.58"
    assert write_amplification_text({"host_write_bytes": 4096,
                                     "write_amplification": 1.0}) == \
        "write amplification 1.00"


def test_counters_without_the_figure_say_it_is_not_known() -> None:
    assert write_amplification_text({}) == "write amplification unknown"
    assert write_amplification_text({"host_write_bytes": 4096}) == \
        "write amplification unknown"


def test_stopping_an_emulator_that_does_not_exist_is_a_bad_argument(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(emulator, "RUN_DIR", tmp_path / "emus")
    result = ssdlab_in_process("emulator", "stop", "--name", "nope")
    assert result.returncode == ExitCode.USAGE
    assert one_line_error(result) == \
        "Error: --name nope: no emulator of that name (see `ssdlab emulator status`)"
    assert result.stdout == ""
