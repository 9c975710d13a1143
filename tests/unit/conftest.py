"""What every unit test shares."""

from __future__ import annotations

from typing import Any

import pytest

from ssdlab.run import member_check, session


@pytest.fixture(autouse=True)
def no_member_sampling(monkeypatch: pytest.MonkeyPatch) -> None:
    """Runs in unit tests do not sample the member devices under their target: a test file
    under the temporary directory would sample the machine's own disk (other I/O in the
    figures, and a members page only where /tmp is on a disk), so each run says it was
    not sampled instead. Tests of the sampling give a run fake members of their own
    (tests/unit/test_member_rounds.py). Nor does the member check read what the
    machine's loop devices hold (tests/unit/test_member_check.py gives its own)."""
    def off(path: str, *args: Any, **kwargs: Any) -> tuple[None, str]:
        return None, f"member devices not sampled in unit tests ({path})"

    monkeypatch.setattr(session, "find_sampler", off)
    # nor what the machine's own loop devices hold: the member check's tests name
    # /dev/loop0..3, which here may be any other test's devices
    monkeypatch.setattr(member_check, "data_share", lambda device: None)
