"""Rounds that start together (issue 33 item 4) on three real hosts: network namespaces
with their own sshd, agents and fio servers, and emulated SSDs (tests/support/netlab.py,
as tests/integration/test_hosts_real.py).

- every round's start is stored: each host's clock offset (the hosts here share one
  clock, so every measured offset must be 0 within its stated uncertainty) and when its
  cells started; the median over the rounds of each cell's skew is at most 50 ms;
- a host whose agent reports its clock 0.3 s ahead of the clock its fio jobs read (the
  agent's documented test hook, given to h2's agent only): its jobs really start 0.3 s
  late (one clock: the times stored are true times), and every round names it late, in
  the stored round, a warning event, the progress output and ``ssdlab show``.
"""

from __future__ import annotations

import statistics
from pathlib import Path

import pytest

from ssdlab.plan.results import HostRoundEvent
from ssdlab.plan.round_start import SKEW_LIMIT_S, RoundStart
from ssdlab.run.agent import CLOCK_SHIFT_ENV
from ssdlab.store.db import Store
from ssdlab.store.records import RunData
from tests.integration.conftest import only_run_id
from tests.integration.test_hosts_real import QUICK_IOPS, Lab, _lab
from tests.support.cli import ssdlab
from tests.support.netlab import NetLab

pytestmark = [pytest.mark.root, pytest.mark.fio]

#: two cells a round (v1.1 tracks 4 KiB random writes alone), 0.1 s each
TWO_CELLS = ("--tracking", "v1.1", "--block-sizes", "4", "--mixes", "100/0,0/100")


def _run(lab: Lab, rounds: int) -> tuple[RunData, str, str]:
    done = ssdlab(*QUICK_IOPS, *TWO_CELLS, "--max-rounds", str(rounds),
                  *lab.target_options(), "--store", str(lab.store), env=lab.env)
    assert done.returncode == 0, done.stderr
    run_id = only_run_id(lab.store)
    with Store.open(lab.store) as store:
        run = store.load(run_id)
    shown = ssdlab("show", run_id, "--store", str(lab.store), env=lab.env)
    assert shown.returncode == 0 and shown.stderr == ""
    return run, done.stdout + done.stderr, shown.stdout


def _starts(run: RunData) -> dict[int, RoundStart]:
    """Each stored ok round's start (every one has it)."""
    events = {e.detail["round"]: HostRoundEvent.from_json(e.detail) for e in run.events
              if e.kind == "host-round" and e.test == "iops" and e.detail}
    ok = [r.round_no for r in run.test("iops").rounds if r.status == "ok"]
    assert len(ok) >= 2
    starts = {}
    for number in ok:
        start = events[number].start
        assert start is not None, number
        assert sorted(start.hosts) == ["h1", "h2", "h3"]
        starts[number] = start
    return starts


def _agent_shifting(lab: Lab, net: NetLab, host: str, shift_s: float) -> None:
    """The agent command, with the test hook for ``host``'s agent only (told apart by
    the address its ssh connection reached)."""
    script = Path(net.ssh_config).parent / "agent.sh"
    address = net.host(host).address
    script.write_text(
        "#!/bin/sh\n"
        f'case "$SSH_CONNECTION" in *" {address} 22") export {CLOCK_SHIFT_ENV}={shift_s} '
        ";; esac\n"
        f'exec {lab.env["SSDLAB_AGENT_COMMAND"]} "$@"\n')
    script.chmod(0o755)
    lab.env["SSDLAB_AGENT_COMMAND"] = f"sh {script}"


def test_three_hosts_start_their_rounds_together(emu_run_dir: Path, shm_dir: Path) -> None:
    with NetLab(3, stranger=False) as net:
        run, _, shown = _run(_lab(net, emu_run_dir, shm_dir), 5)
    starts = _starts(run)
    for start in starts.values():
        for host in start.hosts.values():
            # one clock under every host: the offset is 0, within what was measured
            assert abs(host.clock_offset_s) <= host.clock_uncertainty_s + 0.005
            assert host.clock_uncertainty_s < 0.05
            assert all(w is not None for w in host.woke_s)
        assert len(start.cell_skew_s) == 2 and start.skew_s == start.cell_skew_s[0]
    for position in (0, 1):
        skews = [s.cell_skew_s[position] for s in starts.values()]
        assert all(s is not None for s in skews)
        assert statistics.median(s for s in skews if s is not None) <= SKEW_LIMIT_S, skews
    assert "  round start skew: median " in shown


def test_a_host_that_starts_late_is_named(emu_run_dir: Path, shm_dir: Path) -> None:
    with NetLab(3, stranger=False) as net:
        lab = _lab(net, emu_run_dir, shm_dir)
        _agent_shifting(lab, net, "h2", 0.3)
        run, output, shown = _run(lab, 5)
    starts = _starts(run)
    for number, start in starts.items():
        assert "h2" in start.late, (number, start.late)
        assert start.hosts["h2"].clock_offset_s == pytest.approx(0.3, abs=0.05)
        woke = {name: h.woke_s[0] for name, h in start.hosts.items()}
        assert all(w is not None for w in woke.values())
        others = max(w for n, w in woke.items() if n != "h2" and w is not None)
        assert woke["h2"] is not None and 0.25 <= woke["h2"] - others <= 0.4, woke
        warning = f"host h2 started round {number} late: "
        assert any(e.kind == "warning" and e.message.startswith(warning)
                   for e in run.events), number
        assert warning in output
    assert "host h2 late in rounds " in shown
