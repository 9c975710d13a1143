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
#: one guest per worker at a time (two on the machine: MAX_GUESTS). Which worker runs which
#: module is planned before the first test (:func:`pytest_xdist_make_scheduler`): xdist's
#: own loadfile sends a worker the next module while it still has two tests to run, so the
#: arrays module's worker took the slow member too, 377 s before its own end (the halves
#: came out 963 s and 598 s). ``--dist loadgroup`` is not used: it set every module-scoped
#: fixture up twice (pytest-xdist 3.8). A guest uses about one of the two cores on
#: average (it waits for its drives, SSH round trips, fio's rounds of fixed length), so
#: two at once take less than one after the other.
#:
#: each module's seconds as measured in a whole tier (docs/vmlab.md, at load 4-10): the
#: plan's weights; a module not listed weighs MODULE_SECONDS_ELSE
MODULE_SECONDS = {"test_arrays_real.py": 720, "test_nvme_real.py": 340,
                  "test_sata_scsi_real.py": 250, "test_slow_member_real.py": 240,
                  "test_vmlab_real.py": 15, "test_guest_hosts_real.py": 400}
MODULE_SECONDS_ELSE = 300
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


def plan_modules(modules: list[str], workers: int) -> list[list[str]]:
    """Modules (paths) to ``workers`` by their weights (:data:`MODULE_SECONDS`): the
    heaviest first, each to the worker with the least so far (ties: the first worker)."""
    planned: list[list[str]] = [[] for _ in range(workers)]
    loads = [0] * workers

    def weight(module: str) -> int:
        return MODULE_SECONDS.get(module.rsplit("/", 1)[-1], MODULE_SECONDS_ELSE)

    for module in sorted(modules, key=lambda m: -weight(m)):  # stable: file order at ties
        least = loads.index(min(loads))
        planned[least].append(module)
        loads[least] += weight(module)
    return planned


def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object | None:
    """Under ``--dist loadfile``, the modules planned to the workers before the first
    test (:func:`plan_modules`), each whole on its worker; other modes as xdist does."""
    if config.getoption("dist", None) != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling  # type: ignore[import-untyped]

    class PlannedModules(LoadFileScheduling):  # type: ignore[misc]
        def schedule(self) -> None:
            if (getattr(self, "collection", None) is not None
                    or not self._check_nodes_have_same_collection()):
                super().schedule()
                return
            collection: list[str] = list(next(iter(self.registered_collections.values())))
            self.collection = collection
            units: dict[str, dict[str, bool]] = {}
            for nodeid in collection:
                units.setdefault(self._split_scope(nodeid), {})[nodeid] = False
            for node, modules in zip(self.nodes, plan_modules(list(units), len(self.nodes)),
                                     strict=True):
                for module in modules:
                    self.workqueue[module] = units[module]
                    self._assign_work_unit(node)
            for node in self.nodes:  # all sent: each stops after its last test
                node.shutdown()

    return PlannedModules(config, log)
