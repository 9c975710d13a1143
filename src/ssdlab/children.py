"""Child processes (fio, Chromium) must not outlive ssdlab."""

from __future__ import annotations

import ctypes
import signal

PR_SET_PDEATHSIG = 1


def die_with_parent() -> None:
    """In the child, before exec: let the kernel SIGKILL it if ssdlab itself dies (Linux).

    Elsewhere this does nothing; the callers' watchdogs and timeouts still bound a child.
    """
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    except (OSError, AttributeError):
        pass
