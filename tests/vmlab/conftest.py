"""The VM lab tier (docs/vmlab.md): tests that boot Debian guests under QEMU.

``make test`` runs them in a pytest run of their own, after the others (``-m vmlab``):
guests under software emulation take both cores. The session's lab (its directory, its
guests, its emulators) is removed at the end; a killed session's is removed when the next
one starts (tests/conftest.py). Every test judges counts, never a guest's speed.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator

import pytest

from tests.support.vmimage import VmLabError, host_problem
from tests.support.vmlab import VmLab

#: a test of this tier may take this long (pytest.mark.timeout): the first one also pays
#: for building the image when it is not cached (5-15 minutes; make test builds it first)
VMLAB_TEST_TIMEOUT_S = 1800


def _say(text: str) -> None:
    print(text, file=sys.stderr)


@pytest.fixture(scope="session")
def vmlab() -> Iterator[VmLab]:
    """The session's lab, with the guest image built or found in the cache. Skips where
    guests cannot run (not root, QEMU or debootstrap missing: the reason says which)."""
    problem = host_problem()
    if problem:
        pytest.skip(problem)
    with VmLab(say=_say) as lab:
        try:
            lab.image()
        except VmLabError as exc:
            pytest.fail(str(exc), pytrace=False)
        yield lab
