"""A drive's own count of bytes written (issue 15, item 7): NVMe smart-log JSON, the
emulated SSD's health count, the difference between two readings."""

from __future__ import annotations

import json
import subprocess

import pytest

from ssdlab.analysis.endurance import written_between
from ssdlab.errors import TargetError
from ssdlab.targets.health import (
    DATA_UNIT_BYTES,
    emulator_health,
    parse_nvme_smart_log,
    read_health,
)

#: the fields of ``nvme smart-log -o json`` (nvme-cli 2.x) that matter here, and others
SMART_LOG = {"critical_warning": 0, "temperature": 310, "avail_spare": 100,
             "spare_thresh": 10, "percent_used": 1, "data_units_read": 1234567,
             "data_units_written": 7654321, "host_read_commands": 99,
             "host_write_commands": 98, "power_cycles": 12, "power_on_hours": 3456}


def test_nvme_data_units_are_512000_bytes() -> None:
    reading = parse_nvme_smart_log(json.dumps(SMART_LOG))
    assert reading.host_bytes_written == 7654321 * 512_000
    assert reading.resolution_bytes == DATA_UNIT_BYTES and reading.media_bytes_written is None


@pytest.mark.parametrize(("text", "message"), [
    ("not json", "printed no JSON"),
    ("[]", "no data_units_written"),
    (json.dumps({"data_units_written": -1}), "no data_units_written"),
    (json.dumps({"data_units_written": True}), "no data_units_written"),
])
def test_nvme_output_without_a_count_is_refused(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_nvme_smart_log(text)


def test_the_emulators_health_count_and_nand_writes() -> None:
    truth: dict[str, object] = {"wear": {"data_units_written": 3,
                                         "lifetime_nand_write_bytes": 4_000_000}}
    reading = emulator_health(truth)
    assert (reading.host_bytes_written, reading.media_bytes_written) == (1_536_000, 4_000_000)
    with pytest.raises(ValueError, match="older than this ssdlab"):
        emulator_health({"wear": {}})


def test_read_health_asks_nvme_cli_for_nvme_devices_only() -> None:
    calls: list[list[str]] = []

    def run(command: list[str]) -> subprocess.CompletedProcess[str]:
        calls.append(command)
        return subprocess.CompletedProcess(command, 0, json.dumps(SMART_LOG), "")

    reading = read_health("/dev/nvme0n1", {}, run=run)
    assert reading is not None and reading.host_bytes_written == 7654321 * 512_000
    assert calls == [["nvme", "smart-log", "-o", "json", "/dev/nvme0n1"]]
    # a SATA drive is asked through smartctl (this fake answers it with nvme's JSON: none)
    assert read_health("/dev/sdb", {}, run=run) is None and calls[-1][:2] == ["smartctl", "-j"]

    def failing(command: list[str]) -> subprocess.CompletedProcess[str]:
        return subprocess.CompletedProcess(command, 1, "", "permission denied\n")

    with pytest.raises(TargetError, match="/dev/nvme0n1: nvme smart-log failed: "
                                          "permission denied"):
        read_health("/dev/nvme0n1", {}, run=failing)


@pytest.mark.parametrize(("details", "scope", "source"), [
    # QEMU 7.2: LPA 7, a SMART log per namespace: the namespace's own
    ({"nvme_id_ctrl": {"lpa": 7}, "nvme_namespace": {"nsid": 2}},
     ["--namespace-id", "2"], "nvme smart-log, namespace 2"),
    # a controller with one log for all: the controller's, and the record says so
    ({"nvme_id_ctrl": {"lpa": 2}, "nvme_namespace": {"nsid": 1}}, [],
     "nvme smart-log, the controller's (all its namespaces)"),
    ({"nvme_id_ctrl": {"lpa": 1}}, [], "nvme smart-log, the controller's (all its namespaces)"),
    ({}, [], "nvme smart-log"),
])
def test_nvme_health_reads_the_namespaces_own_log_where_the_controller_keeps_one(
        details: dict[str, object], scope: list[str], source: str) -> None:
    calls: list[list[str]] = []

    def run(command: list[str]) -> subprocess.CompletedProcess[str]:
        calls.append(command)
        return subprocess.CompletedProcess(command, 0, json.dumps(SMART_LOG), "")

    reading = read_health("/dev/nvme1n2", details, run=run)
    assert calls == [["nvme", "smart-log", *scope, "-o", "json", "/dev/nvme1n2"]]
    assert reading is not None and reading.source == source


def test_written_between_two_readings() -> None:
    written = written_between(1_024_000, 5_120_000, DATA_UNIT_BYTES, 2_000_000, 10_000_000)
    assert (written.host_bytes, written.media_bytes) == (4_096_000, 8_000_000)
    assert written.write_amplification == pytest.approx(8_000_000 / 4_096_000)
    assert written_between(0, 0, DATA_UNIT_BYTES).write_amplification is None
    with pytest.raises(ValueError, match="went down"):
        written_between(5, 4, DATA_UNIT_BYTES)


def test_nvme_cli_2_prints_its_128_bit_counters_as_strings() -> None:
    """Debian 12's nvme-cli 2.3 (seen in the VM lab's guest): the counters are strings."""
    reading = parse_nvme_smart_log('{"data_units_read":"611","data_units_written":"166"}')
    assert reading.host_bytes_written == 166 * 512_000
    with pytest.raises(ValueError, match="no data_units_written"):
        parse_nvme_smart_log('{"data_units_written":"-1"}')
