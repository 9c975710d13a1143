"""Arrays ssdlab builds (run/array.py) without a device: each member's own --destroy-data,
the state file, leftovers of killed runs, and the commands build and teardown run (a
fake command runner records them). Real btrfs arrays: tests/integration/test_matrix_real.py
and test_array_refusal_real.py."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from ssdlab.errors import UserError
from ssdlab.plan.array import plan_array
from ssdlab.run import array as arrays
from ssdlab.targets.identity import TargetInfo

MIB = 1024 * 1024


def _info(path: str, serial: str | None) -> TargetInfo:
    return TargetInfo(path, "block", Path(path).name, "nvme", "Model X", serial, "1.0",
                      64 * MIB, 512, 512, False, None, None, None, {})


class FakeCommands:
    """Records each command; fails those starting with a word in ``failing``."""

    def __init__(self, failing: tuple[str, ...] = ()) -> None:
        self.commands: list[list[str]] = []
        self.failing = failing

    def __call__(self, argv: list[str]) -> subprocess.CompletedProcess[str]:
        self.commands.append(argv)
        code = 1 if argv[0] in self.failing else 0
        return subprocess.CompletedProcess(argv, code, "", f"{argv[0]}: it broke\n")


@pytest.fixture
def state_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("SSDLAB_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setattr(arrays, "check_backend", lambda backend, **_: None)
    monkeypatch.setattr(arrays, "await_device", lambda path, run: None)
    monkeypatch.setattr(arrays, "backend_version", lambda backend: "mdadm - v4.2")
    monkeypatch.setattr(arrays, "write_cache_state",  # no command on a made-up /dev/sdb
                        lambda path, name, sysfs=None: {"sysfs": "write back", "enabled": True})
    return tmp_path / "state"


def _plan(backend: str = "md", level: str = "5", name: str = "lab1"):  # type: ignore[no-untyped-def]
    members = ["/dev/sdb", "/dev/sdc", "/dev/sdd"]
    return plan_array(backend, level, members, name=name, member_bytes=64 * MIB,
                      mount_dir=arrays.default_mount_dir(name))


def test_each_member_gets_the_confirmation_naming_it() -> None:
    infos = [_info("/dev/sdb", "S1"), _info("/dev/sdc", "S2"), _info("/dev/sdd", None)]
    assert arrays.member_consent(infos, "S2, S1") == ["S1", "S2", True]
    assert arrays.member_consent(infos, True) == [True, True, True]
    assert arrays.member_consent(infos, False) == [False, False, False]


def test_a_confirmation_naming_no_member_is_refused() -> None:
    infos = [_info("/dev/sdb", "S1"), _info("/dev/sdc", "S2")]
    with pytest.raises(UserError, match="names S9, which is not one of the members"):
        arrays.member_consent(infos, "S1,S9")


def test_build_writes_the_state_first_and_runs_every_command(state_dir: Path) -> None:
    fake = FakeCommands()
    plan = _plan()
    seen: list[bool] = []

    def run(argv: list[str]) -> subprocess.CompletedProcess[str]:
        seen.append((state_dir / "lab1.json").exists())
        return fake(argv)

    state = arrays.build(plan, [_info(m, None) for m in plan.members], owner="R1",
                         say=lambda _: None, run=run)
    assert all(seen), "a command ran before the state file was written"
    assert [c[:2] for c in fake.commands] == [["mdadm", "--create"], ["mdadm", "--wait"]]
    loaded = arrays.find_state("lab1")
    assert loaded.status == "ready" and loaded.owner == "R1" and loaded.plan == plan
    assert loaded.backend_version == "mdadm - v4.2" and state.pid == loaded.pid
    assert [m["path"] for m in loaded.members] == list(plan.members)


def test_a_failed_build_tears_down_what_it_built(state_dir: Path) -> None:
    fake = FakeCommands(failing=("mdadm",))
    plan = _plan()
    with pytest.raises(UserError, match=r"mdadm --create .* failed: mdadm: it broke"):
        arrays.build(plan, [_info(m, None) for m in plan.members], say=lambda _: None,
                     run=fake)
    assert ["wipefs", "--all", "--quiet", *plan.members] in fake.commands
    # the wipe itself succeeded, but mdadm --zero-superblock failed: the state is kept
    assert (state_dir / "lab1.json").exists()


def test_teardown_removes_the_state_only_when_everything_worked(state_dir: Path) -> None:
    plan = _plan("zfs", "5", "tank")
    fake = FakeCommands()
    arrays.build(plan, [_info(m, None) for m in plan.members], say=lambda _: None, run=fake)
    state = arrays.find_state("tank")
    fake.commands.clear()
    arrays.teardown(state, say=lambda _: None, run=fake)
    assert fake.commands[0] == ["zpool", "destroy", "-f", "tank"]
    assert fake.commands[-1] == ["wipefs", "--all", "--quiet", *plan.members]
    assert not (state_dir / "tank.json").exists()


@pytest.mark.parametrize("busy_times", [2, 1_000])
def test_teardown_waits_for_members_still_busy_after_the_unmount(
        state_dir: Path, monkeypatch: pytest.MonkeyPatch, busy_times: int) -> None:
    """wipefs found a btrfs member busy just after the unmount (issue 30's matrix): it is
    tried again until the member is let go, for a while only."""
    monkeypatch.setattr(arrays, "BUSY_WAIT_S", 0.5)
    plan = _plan("zfs", "5", "tank")
    fake = FakeCommands()
    arrays.build(plan, [_info(m, None) for m in plan.members], say=lambda _: None, run=fake)
    wipes: list[list[str]] = []

    def run(argv: list[str]) -> subprocess.CompletedProcess[str]:
        if argv[0] != "wipefs":
            return fake(argv)
        wipes.append(argv)
        busy = len(wipes) <= busy_times
        return subprocess.CompletedProcess(argv, int(busy), "", "wipefs: error: /dev/sdb: "
                                           "probing initialization failed: Device or "
                                           "resource busy" if busy else "")

    state = arrays.find_state("tank")
    if busy_times == 2:
        arrays.teardown(state, say=lambda _: None, run=run)
        assert len(wipes) == 3 and not (state_dir / "tank.json").exists()
    else:  # busy for good: the teardown fails after a while, its state kept
        with pytest.raises(UserError, match="resource busy"):
            arrays.teardown(state, say=lambda _: None, run=run)
        assert 2 <= len(wipes) <= 5 and (state_dir / "tank.json").exists()


def _dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def test_leftovers_are_arrays_of_dead_runs_only(state_dir: Path) -> None:
    fake = FakeCommands()
    for name, owner in (("kept", None), ("ours", "R1"), ("dead", "R2")):
        plan = _plan("zfs", "5", name)
        state = arrays.build(plan, [_info(m, None) for m in plan.members], owner=owner,
                             say=lambda _: None, run=fake)
        if name != "ours":
            state.pid = _dead_pid()
            state.save()
    leftovers = {s.plan.name for s in arrays.load_states() if s.leftover()}
    # an array made by `array create` stays until `array destroy`; a live run's stays
    assert leftovers == {"dead"}
    fake.commands.clear()
    said: list[str] = []
    assert arrays.clean_leftovers(say=said.append, run=fake) == ["dead"]
    assert ["zpool", "destroy", "-f", "dead"] in fake.commands
    assert "left by a stopped run" in said[0]
    assert {s.plan.name for s in arrays.load_states()} == {"kept", "ours"}


def test_an_unreadable_state_file_is_named(state_dir: Path) -> None:
    state_dir.mkdir(parents=True)
    (state_dir / "bad.json").write_text("{", encoding="utf-8")
    with pytest.raises(UserError, match=r"bad.json cannot be read"):
        arrays.load_states()


def test_a_test_file_on_a_btrfs_array_is_found_with_its_provenance(state_dir: Path) -> None:
    plan = plan_array("btrfs", "10", ["/dev/a", "/dev/b", "/dev/c", "/dev/d"], name="fs1",
                      member_bytes=64 * MIB, mount_dir=str(state_dir / "mnt" / "fs1"))
    fake = FakeCommands()
    arrays.build(plan, [_info(m, f"S{m[-1]}") for m in plan.members], say=lambda _: None,
                 run=fake)
    found = arrays.array_of_target(str(state_dir / "mnt" / "fs1" / "ssdlab.test"))
    assert found is not None
    prov = found.provenance()
    assert prov["backend"] == "btrfs" and prov["level"] == "raid10"
    assert prov["chunk_bytes"] == 64 * 1024 and prov["usable_bytes"] == 128 * MIB
    assert [m["serial"] for m in prov["members"]] == ["Sa", "Sb", "Sc", "Sd"]
    assert arrays.array_of_target("/somewhere/else") is None


def test_teardown_finds_members_by_serial_after_their_names_changed(state_dir: Path) -> None:
    """After a reboot nvme0 and nvme1 may swap: the teardown wipes the members by the
    serials they had when built, and refuses where a member is nowhere to be found."""
    plan = _plan("md", "5", "moved")
    fake = FakeCommands()
    arrays.build(plan, [_info(m, f"S-{Path(m).name}") for m in plan.members],
                 say=lambda _: None, run=fake)
    state = arrays.find_state("moved")
    # sdb and sdc swapped names; sdd kept its own
    now = {"/dev/sdb": "S-sdc", "/dev/sdc": "S-sdb", "/dev/sdd": "S-sdd", "/dev/sde": "S-x"}

    def describe(path: str) -> TargetInfo:
        return _info(path, now[path])

    said: list[str] = []
    disks = ["sdb", "sdc", "sdd", "sde"]
    assert arrays.members_now(state, describe=describe, disks=lambda: disks,
                              say=said.append) == ["/dev/sdc", "/dev/sdb", "/dev/sdd"]
    assert said == ["member /dev/sdb (serial S-sdb) is /dev/sdc now",
                    "member /dev/sdc (serial S-sdc) is /dev/sdb now"]
    # sdc is gone, and another drive has sdb's name: that one is not wiped
    now = {"/dev/sdb": "S-x", "/dev/sdd": "S-sdd"}
    with pytest.raises(arrays.ArrayCommandFailed, match=r"member /dev/sdb \(serial S-sdb\) "
                       r"is not found; /dev/sdb is now serial S-x and is not wiped"):
        arrays.members_now(state, describe=describe, disks=lambda: ["sdb", "sdd"])


class ZfsCommands(FakeCommands):
    """As a ZFS machine answers: the pool's available space, a missing pool."""

    def __init__(self, available: str = "596628352", pools: bool = True) -> None:
        super().__init__()
        self.available = available
        self.pools = pools

    def __call__(self, argv: list[str]) -> subprocess.CompletedProcess[str]:
        self.commands.append(argv)
        if argv[:2] == ["zfs", "get"]:
            return subprocess.CompletedProcess(argv, 0, f"{self.available}\n", "")
        if argv[:2] == ["zpool", "destroy"] and not self.pools:
            return subprocess.CompletedProcess(argv, 1, "", f"cannot open '{argv[-1]}': no "
                                               "such pool\n")
        return subprocess.CompletedProcess(argv, 0, "", "")


def test_a_zvol_is_sized_by_what_the_built_pool_has_available(state_dir: Path) -> None:
    """zfs create -V at 80 % of the usable size ran out of space on a real raidz1 of four
    256 MiB drives: ZFS keeps 128 MiB of slop back and charges small raidz blocks more.
    The zvol is sized once the pool exists, by its available space."""
    plan = plan_array("zfs", "5", ["/dev/a", "/dev/b", "/dev/c", "/dev/d"], name="tank",
                      member_bytes=256 * MIB, mount_dir=str(state_dir / "mnt" / "tank"))
    fake = ZfsCommands()
    arrays.build(plan, [_info(m, None) for m in plan.members], say=lambda _: None, run=fake)
    zvol = next(c for c in fake.commands if c[:3] == ["zfs", "create", "-s"])
    assert zvol[4] == str(int(596628352 * 0.8 / (1.5 / 1.375)) // MIB * MIB)  # 417 MiB
    assert ["zfs", "get", "-Hp", "-o", "value", "available", "tank"] in fake.commands
    assert fake.commands[-1][-1] == "tank/files"  # the dataset of the file presets


def test_zfs_teardown_clears_labels_where_zfs_put_them(state_dir: Path,
                                                      tmp_path: Path) -> None:
    """ZFS labels partition 1 of a whole-disk member; a member it never partitioned (the
    pool's creation failed) has none to clear, and a pool that is not there is no
    failure."""
    disks = [str(tmp_path / f"nvme{i}n1") for i in range(2)]
    Path(disks[0] + "p1").touch()  # ZFS partitioned only the first
    plan = plan_array("zfs", "1", disks, name="tank", member_bytes=256 * MIB,
                      mount_dir=str(state_dir / "mnt" / "tank"))
    fake = ZfsCommands(pools=False)
    arrays.build(plan, [_info(m, None) for m in disks], say=lambda _: None, run=fake)
    fake.commands.clear()
    arrays.teardown(arrays.find_state("tank"), say=lambda _: None, run=fake)
    assert fake.commands == [["zpool", "destroy", "-f", "tank"],
                             ["zpool", "labelclear", "-f", disks[0] + "p1"],
                             ["wipefs", "--all", "--quiet", *disks]]
    assert not (state_dir / "tank.json").exists()
    assert not (state_dir / "mnt" / "tank").exists()  # the dataset's mount point too


def test_the_zfs_module_is_loaded_when_no_init_system_did(monkeypatch: pytest.MonkeyPatch
                                                         ) -> None:
    """A guest with no ZFS init unit: zpool says "The ZFS modules are not loaded", so a
    build loads the module itself; a dry run only checks."""
    monkeypatch.setattr("ssdlab.run.array_tools.shutil.which", lambda tool: f"/sbin/{tool}")
    loaded: list[list[str]] = []
    present = {"/sys/module/zfs": False}
    monkeypatch.setattr("ssdlab.run.array_tools.os.path.exists",
                        lambda path: present.get(path, True))

    def run(argv: list[str]) -> subprocess.CompletedProcess[str]:
        loaded.append(argv)
        present["/sys/module/zfs"] = True
        return subprocess.CompletedProcess(argv, 0, "", "")

    with pytest.raises(UserError, match="no zfs support"):
        arrays.check_backend("zfs")
    arrays.check_backend("zfs", run=run)
    assert loaded == [["modprobe", "zfs"]]
    present["/sys/module/zfs"] = False
    with pytest.raises(UserError, match=r"the zfs kernel module cannot be loaded \(`modprobe "
                       r"zfs`: modprobe: FATAL"):
        arrays.check_backend("zfs", run=lambda argv: subprocess.CompletedProcess(
            argv, 1, "", "modprobe: FATAL: Module zfs not found\n"))


@pytest.mark.parametrize("backend", ["md", "zfs"])
def test_a_level_suite_is_planned_on_the_device_it_will_be(backend: str) -> None:
    """A matrix level's suite is planned on its md array or zvol, a block device of the
    size the plan expects, and the dry run says it is built first: never a test file."""
    from ssdlab.run.matrix_run import planned_bytes
    from ssdlab.run.prepare import PreparedTarget, planned_device
    from ssdlab.run.suite import dry_run_create, dry_run_head

    plan = plan_array(backend, "5", ["/dev/a", "/dev/b", "/dev/c", "/dev/d"], name="lvl",
                      member_bytes=256 * MIB, mount_dir="/mnt/lvl")
    size = planned_bytes(plan)
    # md: three members' worth of data; ZFS: 80 % of that less its slop, over raidz's cost
    assert size == 3 * 256 * MIB if backend == "md" else 0 < size < 0.8 * 3 * 256 * MIB
    info = planned_device(plan.target, size, {"array": plan.name})
    assert (info.kind, info.path, info.capacity_bytes) == ("block", plan.target, size)
    head = dry_run_head(PreparedTarget(info, False, {}, {}))
    assert f"Plan for {plan.target} (virtual, about " in head
    assert "built by the run before the suite" in head
    assert dry_run_create(PreparedTarget(info, False, {}, {})) == []
