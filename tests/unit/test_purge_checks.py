"""Purges as the review of the vmnvme/vmsata merges found them (review-today items 1, 2
and the safety decisions): NVMe purges name their path and `show` prints it; a named
ATA secure erase or SCSI sanitize that cannot work is refused before the run, nothing
stored; ``auto`` erases a whole disk only when the whole disk is tested, sends ATA
security commands only to a disk on a libata port, and says why it trimmed instead; a
SATA drive left with a password gets a warning naming the command that removes it."""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from ssdlab.cli.main import build_parser, main
from ssdlab.errors import EnvironmentProblem, TargetError
from ssdlab.plan import op_sweep, specs
from ssdlab.plan.optionsets import PURGE_AUTO_TEXT
from ssdlab.plan.results import PurgeStep
from ssdlab.report.terminal import render_run
from ssdlab.run import pts_run, rounds
from ssdlab.run.prepare import PreparedTarget, check_device_purge, check_file_purge
from ssdlab.store.db import Store
from ssdlab.store.records import StepData
from ssdlab.targets import purge
from ssdlab.targets.ata_scsi import parse_security, sd_bus
from ssdlab.targets.identity import TargetInfo
from ssdlab.targets.purge import check_sd_erase, purge_block, security_warning

FIXTURES = Path(__file__).parent.parent / "fixtures" / "store"
READY = {"supported": True, "enabled": False, "locked": False, "frozen": False}


class Runner:
    """Records commands; every one succeeds, printing ``stdout``."""

    def __init__(self, stdout: str = "") -> None:
        self.calls: list[list[str]] = []
        self.stdout = stdout

    def __call__(self, command: list[str], **_kwargs: Any) -> subprocess.CompletedProcess[str]:
        self.calls.append(list(command))
        return subprocess.CompletedProcess(command, 0, self.stdout, "")


def has_all(tool: str) -> str:
    return f"/usr/sbin/{tool}"


def target(name: str = "sdb", path: str | None = "ata", bus: str = "ata",
           security: dict[str, object] | None = None, device_class: str = "sata_ssd",
           **details: object) -> TargetInfo:
    identify: dict[str, object] = {"path": path, "bus": bus, "security": security or READY}
    return TargetInfo(path=f"/dev/{name}", kind="block", name=name, device_class=device_class,
                      model="M", serial="S", firmware="F", capacity_bytes=1 << 30,
                      logical_sector_bytes=512, physical_sector_bytes=512, rotational=False,
                      numa_node=None, scheduler="none", discard_max_bytes=1 << 31,
                      details={"identity_path": path, "identify": identify, **details}
                      if path else dict(details))


NVME = target("nvme0n1", "nvme", device_class="nvme", nvme_id_ctrl={"sanicap": 2, "fna": 0})


# -- item 1: the NVMe purges name their path ------------------------------------------------


def test_nvme_purges_record_their_path_and_show_prints_it(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(purge, "nvme_controller_of", lambda name, sysfs: "nvme0")
    monkeypatch.setattr(purge, "nvme_namespaces_of", lambda ctrl, sysfs: ["nvme0n1"])
    formatted = purge_block(NVME, "nvme-format", 0, 1 << 30, runner=Runner(), which=has_all)
    done = json.dumps({"sstat": {"status": "(1) completed"}})
    sanitized = purge_block(NVME, "nvme-sanitize", 0, 1 << 30, runner=Runner(done),
                            which=has_all, sleep=lambda s: None)
    assert (formatted.ok, formatted.path) == (True, "nvme")
    assert (sanitized.ok, sanitized.path) == (True, "nvme")
    step = PurgeStep.of(formatted).to_json()
    assert step["path"] == "nvme"
    copy = tmp_path / "suites.sqlite"  # a copy: opening a store may write to it
    shutil.copy(FIXTURES / "suites.sqlite", copy)
    with Store.open(copy) as store:
        run = store.load(store.list_runs()[0].run_id)
    test = run.tests[0]
    purged = replace(test, steps=[StepData(test.name, "purge", step, 0.0, None)])
    shown = render_run(replace(run, tests=[purged, *run.tests[1:]]))
    assert "  purge: nvme-format through nvme: ok" in shown.splitlines()


# -- item 2 and safety (b): a named erase refused before the run ----------------------------


@pytest.mark.parametrize(("info", "method", "message"), [
    (NVME, "ata-secure-erase", "needs an ATA (SATA) disk; /dev/nvme0n1 speaks NVMe"),
    (target("sdb1", partition_of="sdb"), "ata-secure-erase", "it is a partition"),
    (target(), "scsi-sanitize", "needs a SCSI disk; /dev/sdb speaks ATA"),
    (target("loop0", None, device_class="virtual"), "scsi-sanitize",
     "/dev/loop0 speaks neither ATA nor SCSI"),
    (target("md0", None, device_class="virtual"), "ata-secure-erase", "neither ATA nor SCSI"),
    (target(bus="usb"), "ata-secure-erase", "attached through a USB or UAS bridge"),
    (target(bus="sas"), "ata-secure-erase", "a SAS HBA (SATA passed through)"),
    (target(bus="other"), "ata-secure-erase", "an unknown adapter"),
])
def test_a_named_erase_that_cannot_work_is_refused_before_the_run(
        info: TargetInfo, method: str, message: str) -> None:
    for check in (check_file_purge, check_device_purge):
        with pytest.raises(TargetError, match=re.escape(message)) as caught:
            check(info, method)
        assert "\n" not in caught.value.message
    runner = Runner()
    with pytest.raises(TargetError, match=re.escape(message)):
        purge_block(info, method, 0, 1 << 30, runner=runner, which=has_all)
    assert runner.calls == []


def test_a_named_erase_without_its_tool_is_refused_before_the_run() -> None:
    with pytest.raises(EnvironmentProblem, match=r"hdparm is not installed; .*install hdparm"):
        check_sd_erase(target(), "ata-secure-erase", which=lambda tool: None)
    with pytest.raises(EnvironmentProblem, match=r"sg_sanitize is not installed; .*sg3-utils"):
        check_sd_erase(target(path="scsi", bus="usb"), "scsi-sanitize", which=lambda tool: None)
    check_sd_erase(target(), "ata-secure-erase", which=has_all)
    check_sd_erase(target(path="scsi", bus="usb"), "scsi-sanitize", which=has_all)
    check_sd_erase(NVME, "nvme-format", which=lambda tool: None)  # not its check


def test_the_cli_refuses_it_and_stores_nothing(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    host: dict[str, object] = {"cpu_count": 4}
    monkeypatch.setattr(pts_run, "prepare_device", lambda request, read_only=False:
                        PreparedTarget(target(bus="usb"), False, host, {"fio": "fio-3.36"}))
    store = tmp_path / "s.sqlite"
    code = main(["run", "pts", "--target", "/dev/sdb", "--destroy-data", "--purge",
                 "ata-secure-erase", "--store", str(store)])
    err = capsys.readouterr().err
    assert code == 3
    assert err.count("\n") == 1 and err.startswith("Error: refusing --purge ata-secure-erase")
    if store.exists():  # nothing stored
        with Store.open(store) as opened:
            assert opened.list_runs() == []


# -- safety (a) and (b): what auto does -----------------------------------------------------


def test_auto_erases_a_whole_disk_only_when_the_whole_disk_is_tested(tmp_path: Path) -> None:
    runner = Runner()
    part = purge_block(target(), "auto", 0, (1 << 30) // 2, runner=runner, which=has_all,
                       sysfs=tmp_path)
    assert (part.method, part.ok, part.fallback_from) == ("blkdiscard", True, None)
    assert "auto chose blkdiscard: the active range is not the whole disk" in part.detail
    assert [call[0] for call in runner.calls] == ["blkdiscard"]
    scsi = purge_block(target(path="scsi"), "auto", 1 << 20, (1 << 30) - (1 << 20),
                       runner=Runner(), which=has_all, sysfs=tmp_path)
    assert scsi.method == "blkdiscard" and "not the whole disk" in scsi.detail
    # the active range at 100 % is the capacity aligned down to whole MiB: the whole disk
    assert purge.strongest_erase(target(path="scsi"), True) == ("scsi-sanitize", "")


def test_auto_trims_a_sata_disk_behind_a_bridge_and_says_why(tmp_path: Path) -> None:
    runner = Runner()
    outcome = purge_block(target(bus="usb"), "auto", 0, 1 << 30, runner=runner,
                          which=has_all, sysfs=tmp_path)
    assert outcome.method == "blkdiscard" and outcome.fallback_from is None
    assert ("auto chose blkdiscard: the disk is attached through a USB or UAS bridge: auto "
            "sends ATA security commands only to a disk on a libata port") in outcome.detail
    assert not any(call[0] == "hdparm" for call in runner.calls)


def _linked(root: Path, name: str, devpath: str) -> None:
    device = root / "devices" / devpath
    (device / "block" / name).mkdir(parents=True)
    (root / "class" / "block").mkdir(parents=True, exist_ok=True)
    (root / "class" / "block" / name).symlink_to(device / "block" / name)


def test_the_bus_of_a_disk_comes_from_its_sysfs_path(tmp_path: Path) -> None:
    _linked(tmp_path, "sda", "pci0000:00/0000:00:1f.2/ata1/host0/target0:0:0/0:0:0:0")
    _linked(tmp_path, "sdb", "pci0000:00/0000:00:14.0/usb2/2-1/2-1:1.0/host6/target6:0:0/"
                             "6:0:0:0")
    _linked(tmp_path, "sdc", "pci0000:00/0000:01:00.0/host7/port-7:0/end_device-7:0/"
                             "target7:0:0/7:0:0:0")
    _linked(tmp_path, "sdd", "pci0000:00/0000:00:05.0/virtio2/host0/target0:0:0/0:0:0:0")
    assert [sd_bus(d, sysfs=tmp_path) for d in ("sda", "sdb", "sdc", "sdd")] == [
        "ata", "usb", "sas", "other"]


# -- safety (c): a password left on the drive ----------------------------------------------


class _Progress:
    def __init__(self) -> None:
        self.lines: list[str] = []

    def line(self, text: str) -> None:
        self.lines.append(text)


class _Store:
    def __init__(self) -> None:
        self.events: list[tuple[str, str]] = []

    def add_event(self, run_id: str, test: str | None, kind: str, message: str,
                  detail: object) -> None:
        self.events.append((kind, message))


class _Session:
    def __init__(self, info: TargetInfo) -> None:
        self.info, self.remote, self.run_id = info, None, "r1"
        self.progress, self.store = _Progress(), _Store()


def test_a_drive_left_with_a_password_is_named_at_the_start() -> None:
    locked = parse_security("Security:\n\t\tsupported\n\t\tenabled\n\t\tlocked\n"
                            "\tnot\tfrozen\n")
    assert (locked["enabled"], locked["locked"]) == (True, True)
    warning = security_warning(target(security=locked))
    assert warning == (
        "/dev/sdb: ATA security is locked (a user password is set; an interrupted secure "
        "erase leaves ssdlab's 'ssdlab'): remove it with hdparm --user-master u "
        "--security-disable ssdlab /dev/sdb")
    session = _Session(target(security=locked))
    rounds.security_note(session)  # type: ignore[arg-type]
    assert session.store.events == [("warning", warning)]
    assert session.progress.lines == [f"warning: {warning}"]
    for quiet in (target(), target(path="scsi"), NVME):
        session = _Session(quiet)
        rounds.security_note(session)  # type: ignore[arg-type]
        assert session.store.events == []


# -- PURGE_METHODS: one tuple ---------------------------------------------------------------


def test_the_purge_methods_are_one_tuple() -> None:
    """targets/ may not import plan/ (docs/architecture.md): its copy is held equal here."""
    assert purge.PURGE_METHODS == specs.PURGE_METHODS
    whole_target = tuple(m for m in specs.PURGE_METHODS if m != "none")
    assert whole_target == op_sweep.PURGE_METHODS


def test_every_purge_help_says_what_auto_does() -> None:
    """One text for ``--purge auto`` (plan/optionsets.PURGE_AUTO_TEXT) in every suite."""
    helps = {}
    for action in _actions(build_parser()):
        if "--purge" in action.option_strings:
            helps[action.help] = action.default
    assert len(helps) >= 4
    for text in helps:
        assert PURGE_AUTO_TEXT in str(text), text


def _actions(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    found = list(parser._actions)
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                found += _actions(sub)
    return found
