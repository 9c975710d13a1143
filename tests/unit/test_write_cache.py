"""The write-cache state of a device for provenance (issue 15, item 2): the parsers on
recorded outputs of hdparm, nvme-cli and sysfs (tests/fixtures/write_cache, SOURCES.md
there says where each comes from), and ``write_cache_state`` on a fake sysfs with a fake
runner: every failure gives None, never an exception."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from ssdlab.targets.write_cache import (
    parse_hdparm_write_cache,
    parse_nvme_vwc_feature,
    parse_nvme_vwc_present,
    parse_sysfs_write_cache,
    write_cache_state,
)

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "write_cache"


def _text(name: str) -> str:
    return (FIXTURES / name).read_text(encoding="utf-8")


def test_every_fixture_is_listed_in_sources_and_used_here() -> None:
    sources = _text("SOURCES.md")
    me = Path(__file__).read_text(encoding="utf-8")
    files = sorted(p.name for p in FIXTURES.glob("*.txt"))
    assert len(files) >= 10
    for name in files:
        assert f"`{name}`" in sources, f"{name} is not in SOURCES.md"
        assert f'"{name}"' in me, f"no test reads {name}"


# ---------------------------------------------------------------- parsers


@pytest.mark.parametrize(("name", "state"), [
    ("hdparm_W_on_toshiba_mg07aca1.txt", True),
    ("hdparm_W_off_toshiba_mg07aca1.txt", False),
    ("hdparm_W0_set_off_toshiba_mg07aca1.txt", False),
    ("hdparm_W_not_supported_vmware_grep.txt", None),
])
def test_hdparm(name: str, state: bool | None) -> None:
    assert parse_hdparm_write_cache(_text(name)) is state


def test_hdparm_reads_the_state_not_the_setting_and_nothing_else() -> None:
    assert parse_hdparm_write_cache("\n/dev/sda:\n setting drive write-caching to 1 (on)\n"
                                    " write-caching =  0 (off)\n") is False
    assert parse_hdparm_write_cache("") is None
    assert parse_hdparm_write_cache(
        "/dev/sda:\nSG_IO: bad/missing sense data, sb[]:  70 00 05 00\n") is None
    # two devices that disagree are not one device's state
    assert parse_hdparm_write_cache(" write-caching =  1 (on)\n write-caching =  0 (off)\n"
                                    ) is None


@pytest.mark.parametrize(("name", "present"), [
    ("nvme_id_ctrl_tforce_tm8fpl500g_vwc_present.txt", True),
    ("nvme_id_ctrl_optane_m10_vwc_absent.txt", False),
])
def test_nvme_id_ctrl_vwc(name: str, present: bool) -> None:
    assert parse_nvme_vwc_present(_text(name)) is present


def test_nvme_id_ctrl_without_vwc() -> None:
    assert parse_nvme_vwc_present("NVME Identify Controller:\nvid       : 0x8086\n") is None
    assert parse_nvme_vwc_present("vwc       : junk\n") is None
    assert parse_nvme_vwc_present("vwc       : 1\n") is True


@pytest.mark.parametrize(("name", "enabled"), [
    ("nvme_get_feature_vwc_enabled.txt", True),
    ("nvme_get_feature_vwc_disabled.txt", False),
])
def test_nvme_get_feature_value(name: str, enabled: bool) -> None:
    assert parse_nvme_vwc_feature(_text(name)) is enabled


def test_nvme_get_feature_human_readable_and_nvme_cli_1_formats() -> None:
    # -H adds nvme-cli's line (src/nvme-print-stdout.c); no recorded output was found
    human = ("get-feature:0x06 (Volatile Write Cache), Current value:0x00000001\n"
             "\tVolatile Write Cache Enable (WCE): Disabled\n")
    assert parse_nvme_vwc_feature(human) is False
    # nvme-cli 1.x: one-digit feature id, six hex digits
    assert parse_nvme_vwc_feature(
        "get-feature:0x6 (Volatile Write Cache), Current value:0x000001\n") is True
    assert parse_nvme_vwc_feature("NVMe status: Invalid Field in Command(0x2)\n") is None


@pytest.mark.parametrize(("name", "state"), [
    ("sysfs_write_cache_write_back.txt", True),
    ("sysfs_write_cache_zram0.txt", False),
])
def test_sysfs(name: str, state: bool) -> None:
    assert parse_sysfs_write_cache(_text(name)) is state


def test_sysfs_other_values() -> None:
    assert parse_sysfs_write_cache(None) is None
    assert parse_sysfs_write_cache("none") is None


# ---------------------------------------------------------------- write_cache_state


class FakeRun:
    """Answers commands by their first two words with (exit status, output); None for a
    missing tool; an exception to raise it."""

    def __init__(self, answers: dict[str, tuple[int, str] | Exception | None]) -> None:
        self.answers = answers
        self.calls: list[list[str]] = []

    def __call__(self, command: list[str]) -> subprocess.CompletedProcess[str]:
        self.calls.append(command)
        answer = self.answers.get(" ".join(command[:2]))
        if answer is None:
            raise FileNotFoundError(2, "No such file or directory", command[0])
        if isinstance(answer, Exception):
            raise answer
        code, out = answer
        return subprocess.CompletedProcess(command, code, out, "")


def _sysfs(root: Path, name: str, value: str | None, *, partitions: tuple[str, ...] = (),
           ata: bool = False) -> Path:
    """A fake /sys with /sys/class/block/NAME (and partitions under it); ``ata``: a SATA
    disk (the ATA Information VPD page)."""
    disk = root / "devices" / "virtual" / "block" / name
    (disk / "queue").mkdir(parents=True)
    if ata:
        (disk / "device").mkdir()
        (disk / "device" / "vpd_pg89").write_bytes(b"\0\x89")
    if value is not None:
        (disk / "queue" / "write_cache").write_text(value + "\n")
    links = root / "class" / "block"
    links.mkdir(parents=True, exist_ok=True)
    (links / name).symlink_to(disk)
    for part in partitions:
        (disk / part).mkdir()
        (disk / part / "partition").write_text("1\n")
        (links / part).symlink_to(disk / part)
    return root


def test_nvme_with_a_volatile_write_cache(tmp_path: Path) -> None:
    sysfs = _sysfs(tmp_path, "nvme0n1", "write back")
    run = FakeRun({"nvme id-ctrl": (0, _text("nvme_id_ctrl_tforce_tm8fpl500g_vwc_present.txt")),
                   "nvme get-feature": (0, _text("nvme_get_feature_vwc_disabled.txt"))})
    state = write_cache_state("/dev/nvme0n1", "nvme0n1", run=run, sysfs=sysfs)
    assert state == {"sysfs": "write back", "nvme_vwc_present": True, "nvme_vwc": False,
                     "ata_write_cache": None, "scsi_wce": None, "enabled": False,
                     "path": "nvme"}
    assert run.calls == [["nvme", "id-ctrl", "/dev/nvme0n1"],
                         ["nvme", "get-feature", "-f", "6", "-H", "/dev/nvme0n1"]]


def test_nvme_without_a_volatile_write_cache_is_not_asked_for_the_feature(
        tmp_path: Path) -> None:
    sysfs = _sysfs(tmp_path, "nvme1n1", "write through")
    run = FakeRun({"nvme id-ctrl": (0, _text("nvme_id_ctrl_optane_m10_vwc_absent.txt"))})
    state = write_cache_state("/dev/nvme1n1", "nvme1n1", run=run, sysfs=sysfs)
    assert (state["nvme_vwc_present"], state["nvme_vwc"], state["enabled"]) == (
        False, False, False)
    assert len(run.calls) == 1


def test_nvme_feature_read_even_where_id_ctrl_fails(tmp_path: Path) -> None:
    sysfs = _sysfs(tmp_path, "nvme2n1", "write back")
    run = FakeRun({"nvme id-ctrl": (1, ""),
                   "nvme get-feature": (0, _text("nvme_get_feature_vwc_enabled.txt"))})
    state = write_cache_state("/dev/nvme2n1", "nvme2n1", run=run, sysfs=sysfs)
    assert (state["nvme_vwc_present"], state["nvme_vwc"], state["enabled"]) == (
        None, True, True)


def test_sata_partition_is_read_on_its_disk(tmp_path: Path) -> None:
    sysfs = _sysfs(tmp_path, "sda", "write back", partitions=("sda1",), ata=True)
    run = FakeRun({"hdparm -W": (0, _text("hdparm_W_off_toshiba_mg07aca1.txt"))})
    state = write_cache_state("/dev/sda1", "sda1", run=run, sysfs=sysfs)
    assert state == {"sysfs": "write back", "nvme_vwc_present": None, "nvme_vwc": None,
                     "ata_write_cache": False, "scsi_wce": None, "enabled": False,
                     "path": "ata"}
    assert run.calls == [["hdparm", "-W", "/dev/sda"]]


def test_ata_disk_hdparm_not_supported_falls_back_to_sysfs(tmp_path: Path) -> None:
    sysfs = _sysfs(tmp_path, "sdb", "write through", ata=True)
    run = FakeRun({"hdparm -W": (0, _text("hdparm_W_not_supported_vmware_grep.txt"))})
    state = write_cache_state("/dev/sdb", "sdb", run=run, sysfs=sysfs)
    assert (state["ata_write_cache"], state["enabled"], state["path"]) == (
        None, False, "sysfs")


#: ``sdparm --get=WCE /dev/sda`` on a QEMU 7.2 virtio-scsi disk (Debian 12's sdparm
#: 1.12), exit status 5 after the current value (the disk keeps no saved values)
SDPARM_HEAD = "    /dev/sda: QEMU      QEMU HARDDISK     2.5+\n"
SDPARM_WCE_ON = SDPARM_HEAD + "WCE           1  [cha: y, def:  1]\n"
SDPARM_WCE_OFF = SDPARM_HEAD + "WCE           0  [cha: y, def:  0]\n"


@pytest.mark.parametrize(("answer", "expected"), [((5, SDPARM_WCE_ON), True),
                                                  ((0, SDPARM_WCE_OFF), False)])
def test_scsi_disk_reads_the_caching_mode_page(tmp_path: Path, answer: tuple[int, str],
                                               expected: bool) -> None:
    sysfs = _sysfs(tmp_path, "sdd", "write back")
    run = FakeRun({"sdparm --get=WCE": answer})
    state = write_cache_state("/dev/sdd", "sdd", run=run, sysfs=sysfs)
    assert run.calls == [["sdparm", "--get=WCE", "/dev/sdd"]]
    assert (state["scsi_wce"], state["enabled"], state["path"]) == (expected, expected, "scsi")


@pytest.mark.parametrize("answer", [None, (5, "    /dev/sdd: QEMU\n"), OSError(5, "EIO")])
def test_scsi_disk_without_an_answer_falls_back_to_sysfs(
        tmp_path: Path, answer: tuple[int, str] | Exception | None) -> None:
    sysfs = _sysfs(tmp_path, "sdd", "write through")
    state = write_cache_state("/dev/sdd", "sdd", run=FakeRun({"sdparm --get=WCE": answer}),
                              sysfs=sysfs)
    assert (state["scsi_wce"], state["enabled"], state["path"]) == (None, False, "sysfs")


@pytest.mark.parametrize("answer", [
    None, (1, " HDIO_DRIVE_CMD(identify) failed: Input/output error\n"),
    subprocess.TimeoutExpired(["hdparm"], 30), PermissionError(13, "denied"), (0, "junk")])
def test_every_command_failure_gives_none(tmp_path: Path,
                                          answer: tuple[int, str] | Exception | None) -> None:
    sysfs = _sysfs(tmp_path, "sdc", "write back", ata=True)
    state = write_cache_state("/dev/sdc", "sdc", run=FakeRun({"hdparm -W": answer}),
                              sysfs=sysfs)
    assert (state["ata_write_cache"], state["enabled"]) == (None, True)


def test_nvme_tools_missing_gives_none(tmp_path: Path) -> None:
    sysfs = _sysfs(tmp_path, "nvme3n1", "write back")
    state = write_cache_state("/dev/nvme3n1", "nvme3n1", run=FakeRun({}), sysfs=sysfs)
    assert (state["nvme_vwc_present"], state["nvme_vwc"], state["enabled"]) == (
        None, None, True)


@pytest.mark.parametrize(("name", "value"), [("loop0", "write back"), ("zram0", "write through"),
                                             ("md127", "write back"), ("dm-0", None)])
def test_virtual_devices_give_sysfs_only(tmp_path: Path, name: str, value: str | None) -> None:
    sysfs = _sysfs(tmp_path, name, value)
    run = FakeRun({})
    state = write_cache_state(f"/dev/{name}", name, run=run, sysfs=sysfs)
    assert run.calls == []
    assert state["sysfs"] == value
    assert state["enabled"] is parse_sysfs_write_cache(value)


def test_a_device_missing_from_sysfs(tmp_path: Path) -> None:
    state = write_cache_state("/dev/sdz", "sdz", run=FakeRun({}), sysfs=tmp_path)
    assert state == {"sysfs": None, "nvme_vwc_present": None, "nvme_vwc": None,
                     "ata_write_cache": None, "scsi_wce": None, "enabled": None,
                     "path": None}
