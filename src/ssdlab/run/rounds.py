"""What a run's session does to the target between its rounds, recorded: purge (the active
range back to fresh-out-of-box, a step), a warning where a SATA drive's ATA security has
a password set when the run starts, and the note that a stopped test goes on after
its last round (an event, with how long the drive was idle).
:class:`~ssdlab.run.session.RunSession` calls these (its methods of the same names).
"""

from __future__ import annotations

import time
from typing import Protocol

from ssdlab.engine.runner import Executor
from ssdlab.plan.results import PurgeStep, ResumedAfter
from ssdlab.run.hosts import remote_purge
from ssdlab.run.nbd import purge_nbd
from ssdlab.run.progress import Progress
from ssdlab.run.remote import RemoteSet
from ssdlab.run.suite import FioSetup
from ssdlab.store.db import Store
from ssdlab.store.records import RoundData
from ssdlab.targets.filetarget import recreate_file_target
from ssdlab.targets.identity import TargetInfo
from ssdlab.targets.nbd import NBD_KIND
from ssdlab.targets.purge import PurgeOutcome, purge_block, security_warning


class Session(Protocol):
    """What of the run's session these use."""

    info: TargetInfo
    store: Store
    run_id: str
    executor: Executor
    progress: Progress
    fio: FioSetup
    remote: RemoteSet | None

    def ground_truth(self, test: str | None, when: str) -> object: ...


def security_note(s: Session) -> None:
    """At a run's start (and resume): a SATA drive whose ATA security says a password is
    set (perhaps one an interrupted secure erase left) gets a one-line warning that names
    the command that removes it."""
    warning = security_warning(s.info) if s.remote is None and s.info.kind == "block" \
        else None
    if warning is not None:
        s.progress.line(f"warning: {warning}")
        s.store.add_event(s.run_id, None, "warning", warning, None)


def purge(s: Session, test: str, method: str, offset_bytes: int, size_bytes: int) -> PurgeOutcome:
    """Return the target (its active range) to fresh-out-of-box; recorded as a step."""
    s.progress.phase("purge")
    outcome: PurgeOutcome
    if s.remote is not None:
        outcome = remote_purge(s.remote, method, offset_bytes, size_bytes)
    elif s.info.kind == "file":
        outcome = recreate_file_target(s.info.path, s.info.capacity_bytes)
    elif s.info.kind == NBD_KIND:  # an export has no erase: trim through fio, if it can
        outcome = purge_nbd(s.info, method, offset_bytes, size_bytes, s.executor,
                            s.fio.ssdlab_version)
    else:
        outcome = purge_block(s.info, method, offset_bytes, size_bytes)
    step = PurgeStep.of(outcome)
    s.store.add_step(s.run_id, test, "purge", step, None)
    s.ground_truth(test, "purge")
    verdict = "ok" if outcome.ok else f"FAILED ({outcome.detail})"
    s.progress.line(f"{test}: purge by {outcome.method}: {verdict} in "
                    f"{outcome.seconds:.1f} s")
    if not outcome.ok:
        s.store.add_event(
            s.run_id, test, "warning",
            f"purge by {outcome.method} failed; the test starts "
            "from a state that is not fresh-out-of-box",
            step,
        )
    return outcome


def resumed_after(s: Session, test: str, kind: str, last: RoundData, unit: str,
                  consequence: str) -> None:
    """A stopped test goes on after round ``last`` (its ``unit``): recorded with how long
    the drive was idle since, and ``consequence`` (what that means for the test)."""
    idle = time.time() - last.ended_at
    s.store.add_event(
        s.run_id, test, kind, f"resumed after {unit} {last.round_no}: the drive was idle "
        f"for {idle:,.0f} s{consequence}", ResumedAfter(last.round_no, idle))
