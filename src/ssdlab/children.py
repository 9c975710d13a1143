"""Child processes (fio, Chromium) must not outlive ssdlab."""

from __future__ import annotations

import ctypes
import signal

PR_SET_PDEATHSIG = 1


def _find_prctl() -> object | None:
    try:
        return ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None


#: resolved once, here: the child (forked while other threads may hold the dynamic
#: loader's lock, as in a set's threads) only calls it, and opens no library
_PRCTL = _find_prctl()


def die_with_parent(sig: int = signal.SIGKILL) -> None:
    """In the child, before exec: let the kernel SIGKILL it (or send ``sig``) if ssdlab
    itself dies (Linux).
    (The signal comes when the *thread* that started the child ends: start children that
    must outlive a worker thread from the main thread.)

    Elsewhere this does nothing; the callers' watchdogs and timeouts still bound a child.
    """
    if callable(_PRCTL):
        _PRCTL(PR_SET_PDEATHSIG, sig)
