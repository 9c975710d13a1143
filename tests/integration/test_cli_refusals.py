"""Bad input and refused targets: one-line error, documented exit code, nothing written."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from ssdlab.cli.main import build_parser
from ssdlab.targets.filetarget import create_file_target
from tests.conftest import LoopFactory
from tests.support.cli import one_line_error, sha256_of, ssdlab

MIB = 1024 * 1024


def _backing(device: str) -> str:
    return Path(f"/sys/block/{Path(device).name}/loop/backing_file").read_text().strip()


def _root_disk() -> str:
    source = subprocess.run(
        ["findmnt", "-no", "SOURCE", "/"], capture_output=True, text=True, check=True
    ).stdout.strip()
    parent = subprocess.run(
        ["lsblk", "-no", "PKNAME", source], capture_output=True, text=True, check=False
    ).stdout.strip()
    return f"/dev/{parent}" if parent else source


def test_missing_target(tmp_path: Path) -> None:
    result = ssdlab(
        "run",
        "pts",
        "--target",
        str(tmp_path / "nodir" / "x.img"),
        "--size",
        "1GiB",
        "--store",
        str(tmp_path / "s.sqlite"),
    )
    assert result.returncode == 3
    assert "does not exist" in one_line_error(result)
    assert not (tmp_path / "s.sqlite").exists()


def test_new_file_needs_a_size(tmp_path: Path) -> None:
    result = ssdlab("run", "pts", "--target", str(tmp_path / "x.img"))
    assert result.returncode == 2
    assert "--size" in one_line_error(result)
    assert not (tmp_path / "x.img").exists()


def test_foreign_file_is_refused(tmp_path: Path) -> None:
    victim = tmp_path / "precious.dat"
    victim.write_bytes(b"keep me" * 1000)
    result = ssdlab("run", "pts", "--target", str(victim), "--store", str(tmp_path / "s"))
    assert result.returncode == 3
    assert "not created by ssdlab" in one_line_error(result)
    assert victim.read_bytes() == b"keep me" * 1000


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--max-rounds", "3"], "window"),
        (["--mixes", "60/30"], "add up to 100"),
        (["--block-sizes", "700b"], "multiple of 512"),
        (["--tests", "iops,bogus"], "bogus"),
        (["--active-range", "0"], "--active-range"),
        (["--profile", "fast"], "invalid choice"),
        (["--round-seconds", "-1"], "--round-seconds"),
        (["--round-seconds", "0.0004"], "whole number of milliseconds"),
        (["--threads", "200"], "too many"),
    ],
)
def test_bad_options_fail_before_any_io(tmp_path: Path, args: list[str], needle: str) -> None:
    target = tmp_path / "x.img"
    result = ssdlab(
        "run",
        "pts",
        "--target",
        str(target),
        "--size",
        "128MiB",
        "--store",
        str(tmp_path / "s.sqlite"),
        *args,
    )
    assert result.returncode == 2
    assert needle in one_line_error(result)
    assert not target.exists() and not (tmp_path / "s.sqlite").exists()


def test_fio_missing_and_too_old(tmp_path: Path) -> None:
    target = str(tmp_path / "x.img")
    missing = ssdlab(
        "run", "pts", "--target", target, "--size", "128MiB", "--fio", str(tmp_path / "no-fio")
    )
    assert missing.returncode == 4
    assert "fio" in one_line_error(missing)
    old = tmp_path / "old-fio"
    old.write_text("#!/bin/sh\necho fio-2.21\n")
    old.chmod(0o755)
    too_old = ssdlab("run", "pts", "--target", target, "--size", "128MiB", "--fio", str(old))
    assert too_old.returncode == 4
    assert "too old" in one_line_error(too_old)
    assert not os.path.exists(target)


def test_unknown_run_and_bad_store(tmp_path: Path) -> None:
    store = tmp_path / "s.sqlite"
    missing = ssdlab("show", "nosuchrun", "--store", str(store))
    assert missing.returncode == 5
    one_line_error(missing)
    assert not store.exists()  # reading never creates a store
    junk = tmp_path / "junk.sqlite"
    junk.write_bytes(b"this is not a database" * 100)
    bad = ssdlab("runs", "--store", str(junk))
    assert bad.returncode == 4
    assert "not an SQLite database" in one_line_error(bad)
    assert junk.read_bytes() == b"this is not a database" * 100


@pytest.mark.root
def test_block_device_needs_destroy_data(loop_device: LoopFactory, tmp_path: Path) -> None:
    device = loop_device(128 * MIB)
    before = sha256_of(_backing(device))
    result = ssdlab("run", "pts", "--target", device, "--store", str(tmp_path / "s.sqlite"))
    assert result.returncode == 3
    assert "--destroy-data" in one_line_error(result)
    assert sha256_of(_backing(device)) == before
    assert not (tmp_path / "s.sqlite").exists()


@pytest.mark.root
def test_too_small_and_size_on_device(loop_device: LoopFactory, tmp_path: Path) -> None:
    small = loop_device(32 * MIB)
    result = ssdlab("run", "pts", "--target", small, "--destroy-data")
    assert result.returncode == 3
    assert "too small" in one_line_error(result)
    sized = ssdlab("run", "pts", "--target", small, "--destroy-data", "--size", "1GiB")
    assert sized.returncode == 2
    assert "--size applies to file targets" in one_line_error(sized)
    nvme = ssdlab("run", "pts", "--target", small, "--destroy-data", "--purge", "nvme-format")
    assert nvme.returncode == 2
    assert "NVMe" in one_line_error(nvme)


@pytest.mark.root
def test_a_whole_disk_erase_of_a_loop_device_is_refused_before_the_run(
        loop_device: LoopFactory, tmp_path: Path) -> None:
    """A named ATA secure erase or SCSI sanitize of a device that is no SATA or SCSI disk
    is refused before the run, as an NVMe purge is: nothing stored, nothing written."""
    device = loop_device(128 * MIB)
    before = sha256_of(_backing(device))
    store = tmp_path / "s.sqlite"
    for method in ("ata-secure-erase", "scsi-sanitize"):
        result = ssdlab("run", "pts", "--target", device, "--destroy-data", "--purge", method,
                        "--store", str(store))
        assert result.returncode == 3, result.stderr
        assert f"--purge {method} needs" in one_line_error(result)
        assert "speaks neither ATA nor SCSI" in one_line_error(result)
    assert not store.exists()  # no run was opened
    assert sha256_of(_backing(device)) == before


@pytest.mark.root
def test_mounted_device_is_refused(loop_device: LoopFactory, shm_dir: Path) -> None:
    device = loop_device(128 * MIB)
    subprocess.run(["mkfs.ext4", "-q", device], check=True)
    mnt = shm_dir / "mnt"
    mnt.mkdir()
    before = sha256_of(_backing(device))
    # read-only, no journal replay: the mount itself writes nothing, so any change is ours
    subprocess.run(["mount", "-o", "ro,noload", device, str(mnt)], check=True)
    try:
        result = ssdlab("run", "pts", "--target", device, "--destroy-data", "--dry-run")
        assert result.returncode == 3
        assert "mounted" in one_line_error(result)
    finally:
        subprocess.run(["umount", str(mnt)], check=True)
    assert sha256_of(_backing(device)) == before


@pytest.mark.root
def test_root_disk_is_refused_by_detection_in_dry_run() -> None:
    result = ssdlab("run", "pts", "--target", _root_disk(), "--destroy-data", "--dry-run")
    assert result.returncode == 3
    assert "running system" in one_line_error(result)


@pytest.mark.root
def test_dry_run_prints_every_job_file_and_writes_nothing(
    loop_device: LoopFactory, tmp_path: Path
) -> None:
    device = loop_device(128 * MIB)
    before = sha256_of(_backing(device))
    store = tmp_path / "s.sqlite"
    result = ssdlab(
        "run",
        "pts",
        "--target",
        device,
        "--destroy-data",
        "--dry-run",
        "--profile",
        "quick",
        "--store",
        str(store),
    )
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    assert result.stdout.count("[global]") == 2 * 4  # preconditioning + round, 4 tests
    cells = (1 + 8 * 7) + 2 * (1 + 2) + (1 + 3 * 3)  # preconditioning + round cells
    assert result.stdout.count("stonewall") == cells
    assert sha256_of(_backing(device)) == before
    assert not store.exists()


# --------------------------------------------------------------------------- --destroy-data forms


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["run", "pts", "--target", "/dev/x"], False),
        (["run", "pts", "--target", "/dev/x", "--destroy-data"], True),
        (["run", "pts", "--destroy-data", "--target", "/dev/x"], True),
        (["run", "pts", "--target", "/dev/x", "--destroy-data=S123"], "S123"),
        (["run", "pts", "--target", "/dev/x", "--destroy-data=/dev/x"], "/dev/x"),
        (["run", "pts", "--target", "/dev/x", "--destroy-data", "/dev/x", "--dry-run"], "/dev/x"),
        (["run", "saturation", "--target", "/dev/x", "--destroy-data=S1"], "S1"),
        (["run", "latency-iops", "--target", "/dev/x", "--destroy-data=S1"], "S1"),
        (["run", "slc-probe", "--target", "/dev/x", "--destroy-data=S1"], "S1"),
        (["run", "op-sweep", "--target", "/dev/x", "--destroy-data=S1"], "S1"),
        (["resume", "last", "--destroy-data"], True),
        (["resume", "last", "--destroy-data=/dev/x"], "/dev/x"),
        (["resume", "last"], False),
    ],
)
def test_destroy_data_forms(argv: list[str], expected: bool | str) -> None:
    assert build_parser().parse_args(argv).destroy_data == expected


def test_empty_confirmation_and_confirmation_for_a_file_are_usage_errors(tmp_path: Path) -> None:
    empty = ssdlab("run", "pts", "--target", "/dev/null", "--destroy-data=")
    assert empty.returncode == 2
    assert "--destroy-data" in one_line_error(empty)
    target = tmp_path / "x.img"
    named = ssdlab("run", "pts", "--target", str(target), "--size", "128MiB",
                   "--destroy-data=S123", "--store", str(tmp_path / "s.sqlite"))
    assert named.returncode == 2
    assert "file targets need no --destroy-data" in one_line_error(named)
    assert not target.exists() and not (tmp_path / "s.sqlite").exists()


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--purge", "blkdiscard"], "--read-only never purges"),
        (["--mixes", "100/0,65/35"], "--mixes 100/0,65/35 includes writes"),
        (["--latency-mixes", "0/100"], "--latency-mixes 0/100 includes writes"),
    ],
)
def test_read_only_refuses_options_that_write(shm_dir: Path, tmp_path: Path, args: list[str],
                                              needle: str) -> None:
    target = shm_dir / "x.img"
    create_file_target(str(target), 128 * MIB)
    result = ssdlab("run", "pts", "--target", str(target), "--read-only", *args, "--store",
                    str(tmp_path / "s.sqlite"))
    assert result.returncode == 2
    assert needle in one_line_error(result)
    assert not (tmp_path / "s.sqlite").exists()


def test_read_only_creates_no_file(tmp_path: Path) -> None:
    target = tmp_path / "x.img"
    result = ssdlab("run", "pts", "--target", str(target), "--size", "128MiB", "--read-only")
    assert result.returncode == 2
    assert "--read-only writes nothing, so it cannot create" in one_line_error(result)
    assert not target.exists()


def test_read_only_dry_run_plans_only_read_cells(shm_dir: Path) -> None:
    target = shm_dir / "x.img"
    create_file_target(str(target), 128 * MIB)
    before = sha256_of(target)
    result = ssdlab("run", "pts", "--target", str(target), "--read-only", "--dry-run",
                    "--profile", "quick")
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "rw=randwrite" not in out and "rw=write" not in out and "rwmixread" not in out
    assert "-- preconditioning job file:" not in out
    assert out.count("purge: none") == 4
    assert out.count("read-only: fio runs with --readonly") == 4
    assert out.count("stonewall") == 8 + 2 * 1 + 3  # IOPS, throughput, latency at 100/0
    assert sha256_of(target) == before
