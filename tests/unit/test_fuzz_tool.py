"""tools/fuzz.py keeps working: a few inputs of each target, and a bug is reported."""

from __future__ import annotations

from typing import Any

import pytest

from tools import fuzz


@pytest.mark.parametrize("target", sorted(fuzz.TARGETS))
def test_a_short_run_counts_its_inputs(target: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert fuzz.fuzz(target, 40, first_seed=1, chunk=25) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"{target}: 40 inputs in ") and "no failure" in out
    assert sum(int(line.split()[0].replace(",", "")) for line in out.splitlines()[1:]) == 40


def test_an_unexpected_exception_fails_the_run(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def broken(_: Any) -> str:
        raise ZeroDivisionError("a bug")

    monkeypatch.setitem(fuzz.TARGETS, "config", (fuzz.config_inputs, broken))
    assert fuzz.fuzz("config", 10, first_seed=1) == 1
    err = capsys.readouterr().err
    assert "FAILURE after 0 inputs" in err and "ZeroDivisionError" in err
