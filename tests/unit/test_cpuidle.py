"""Idle CPUs while fio runs: the policy from the environment, the wake-up latency hold,
the facts a run records, and what reports make of them (cpuidle.py)."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from ssdlab import cpuidle
from ssdlab.errors import ExitCode, UserError
from ssdlab.report.compare_pages import mismatches, parameter_rows
from ssdlab.report.parts import idle_cpus
from ssdlab.store.records import RunData


def test_the_policy_defaults_to_poll_and_takes_system() -> None:
    assert cpuidle.policy({}) == "poll"
    assert cpuidle.policy({"SSDLAB_CPU_IDLE": ""}) == "poll"
    assert cpuidle.policy({"SSDLAB_CPU_IDLE": " System "}) == "system"
    assert cpuidle.policy({"SSDLAB_CPU_IDLE": "poll"}) == "poll"


def test_an_unknown_policy_is_a_one_line_usage_error() -> None:
    with pytest.raises(UserError) as info:
        cpuidle.policy({"SSDLAB_CPU_IDLE": "c6"})
    assert info.value.exit_code == ExitCode.USAGE
    assert "SSDLAB_CPU_IDLE='c6'" in info.value.message and "\n" not in info.value.message


def test_the_hold_writes_a_zero_limit_and_keeps_the_file_open_until_left(tmp_path: Path) -> None:
    device = tmp_path / "cpu_dma_latency"
    device.write_bytes(b"")
    with cpuidle.WakeupLatencyHold(device) as hold:
        assert hold.held and hold.reason is None
        assert struct.unpack("i", device.read_bytes()) == (0,)
        fd = hold._fd
        assert fd is not None
        assert Path(f"/proc/self/fd/{fd}").resolve() == device
    assert not hold.held and hold._fd is None
    assert not Path(f"/proc/self/fd/{fd}").exists() or (
        Path(f"/proc/self/fd/{fd}").resolve() != device)


def test_a_missing_qos_device_is_not_held_and_says_why(tmp_path: Path) -> None:
    with cpuidle.WakeupLatencyHold(tmp_path / "absent") as hold:
        assert not hold.held
        assert hold.reason is not None and "absent" in hold.reason
        assert "No such file" in hold.reason


def test_the_system_policy_holds_nothing(tmp_path: Path) -> None:
    with cpuidle.idle_policy("system") as hold:
        assert hold is None


def _fake_cpu_tree(root: Path) -> Path:
    cpu = root / "devices" / "system" / "cpu"
    (cpu / "cpuidle").mkdir(parents=True)
    (cpu / "cpuidle" / "current_driver").write_text("intel_idle\n")
    (cpu / "cpuidle" / "current_governor_ro").write_text("menu\n")
    for n, (name, latency, disabled) in enumerate(
            [("POLL", "0", "0"), ("C1", "2", "0"), ("C6", "170", "1"), ("C1E", "10", "0")]):
        state = cpu / "cpu0" / "cpuidle" / f"state{n}"
        state.mkdir(parents=True)
        (state / "name").write_text(name + "\n")
        (state / "latency").write_text(latency + "\n")
        (state / "disable").write_text(disabled + "\n")
    # state10 sorts after state9, not after state1
    state = cpu / "cpu0" / "cpuidle" / "state10"
    state.mkdir()
    (state / "name").write_text("C10\n")
    (state / "latency").write_text("890\n")
    return cpu


def test_idle_facts_name_the_driver_governor_and_states_in_depth_order(tmp_path: Path) -> None:
    cpu = _fake_cpu_tree(tmp_path / "sys")
    device = tmp_path / "qos"
    device.write_bytes(b"")
    facts = cpuidle.idle_facts("poll", sysfs_cpu=cpu, device=device)
    assert facts["policy"] == "poll"
    assert facts["driver"] == "intel_idle" and facts["governor"] == "menu"
    assert facts["held"] is True
    assert facts["wakeup_latency"] == (
        f"poll while fio runs (0 us wake-up latency limit held on {device})")
    states = facts["states"]
    assert isinstance(states, list)
    assert [s["name"] for s in states] == ["POLL", "C1", "C6", "C1E", "C10"]
    assert [s["exit_latency_us"] for s in states] == [0, 2, 170, 10, 890]
    assert [s["disabled"] for s in states] == [False, False, True, False, False]

    missing = cpuidle.idle_facts("poll", sysfs_cpu=cpu, device=tmp_path / "nope")
    assert missing["held"] is False
    assert str(missing["wakeup_latency"]).startswith(
        "may sleep: the 0 us limit could not be held (")
    system = cpuidle.idle_facts("system", sysfs_cpu=cpu, device=device)
    assert system["wakeup_latency"] == "the host's own idle policy (SSDLAB_CPU_IDLE=system)"
    assert system["held"] is None


def test_idle_facts_without_cpuidle_in_sysfs(tmp_path: Path) -> None:
    facts = cpuidle.idle_facts("system", sysfs_cpu=tmp_path)
    assert facts["driver"] is None and facts["governor"] is None and facts["states"] == []


def _run(host: dict[str, object], reference: bool = False) -> RunData:
    return RunData(
        run_id="r", created_at=0.0, finished_at=1.0, suite="pts", profile="quick", quick=True,
        status="complete", message="", target_path="/dev/x", target_model=None,
        read_only=reference, target={"path": "/dev/x"}, host=host, plan={"options": {}},
        versions={"fio": "3.33"}, argv=[],
    )


POLLED: dict[str, object] = {
    "cpu_idle": {"policy": "poll", "held": True, "driver": "haltpoll", "governor": "haltpoll",
                 "wakeup_latency": "poll while fio runs (0 us ...)"}
}
SLEPT: dict[str, object] = {
    "cpu_idle": {"policy": "system", "held": None, "driver": "intel_idle", "governor": "menu",
                 "wakeup_latency": "the host's own idle policy (SSDLAB_CPU_IDLE=system)"}
}
NOT_HELD: dict[str, object] = {
    "cpu_idle": {"policy": "poll", "held": False, "driver": None, "governor": None,
                 "wakeup_latency": "may sleep: the 0 us limit could not be held (x)"}
}


def test_the_title_page_says_how_idle_cpus_behaved() -> None:
    assert idle_cpus(POLLED) == (
        "poll while fio runs (0 us ...); cpuidle driver / governor: "
        "haltpoll / haltpoll")
    assert idle_cpus(NOT_HELD).endswith("driver / governor: -")
    assert idle_cpus({}) == "-"  # recorded before ssdlab kept it, or a reference run


def test_a_comparison_flags_latency_when_idle_cpus_polled_in_one_run_only() -> None:
    rows = dict(parameter_rows([_run(POLLED), _run(SLEPT), _run({}), _run({}, True)]))
    assert rows["idle CPUs"] == ["poll", "system", "-", "published"]
    assert "latency" not in mismatches([_run(POLLED), _run(POLLED), _run({})])
    assert "idle CPUs polled in some runs" in mismatches([_run(POLLED), _run(SLEPT)])["latency"]
    # a poll policy that could not be held is the system's policy
    assert "latency" not in mismatches([_run(SLEPT), _run(NOT_HELD)])
