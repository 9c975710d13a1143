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

#: ``make test`` runs the tier on two pytest-xdist workers (``-n 2 --dist loadfile
#: --no-loadscope-reorder``): each module whole on one worker with its module-scoped guest,
#: one guest per worker at a time (two on the machine: MAX_GUESTS). In the modules' file
#: order the workers take arrays and NVMe first, then SATA/SCSI and the slow member: about
#: equal halves (docs/vmlab.md, "The tests"). ``--dist loadgroup`` is not used: it set
#: every module-scoped fixture up twice (pytest-xdist 3.8). A guest uses about one of the
#: two cores on average (it waits for its drives, SSH round trips, fio's rounds of fixed
#: length), so two at once take less than one after the other
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
