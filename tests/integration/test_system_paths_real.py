"""Where test files are made, through the command line: a mistyped device name
(``--target /dev/nosuch --size 64MiB``) is refused with exit code 3 by every suite that
takes a target, every set and the matrix, and nothing is made (before, it became a
regular file in the RAM-backed /dev and the suite ran on it, exit 0). The same holds for
a link that leads into /dev, /proc, /sys or /run, and for a work directory there.
/dev/shm is the exception (RAM's place for files): a real run works there, also through
a link. A foreign file as ``--target`` is refused as foreign, never as "--size" that was
not given; an ssdlab test file too small for a preset says its own size.

The suites come from the registry: a suite added later is covered without a change here.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from ssdlab.plan.suite import TargetKind
from ssdlab.suites import Suite, runnable
from ssdlab.targets.filetarget import create_file_target
from tests.support.cli import one_line_error, sha256_of, ssdlab, ssdlab_in_process

pytestmark = [pytest.mark.fio]
#: a short PTS IOPS test: two cells of 0.1 s a round, 5 rounds
PTS = ("--profile", "quick", "--tests", "iops", "--block-sizes", "4", "--mixes",
       "0/100,100/0", "--round-seconds", "0.1", "--max-rounds", "5")
NOT_A_DEVICE = "is not a block device"
FOREIGN_BYTES = 788_787  # 770.3 KiB, as the user who found it had


def _flags(suite: Suite) -> set[str]:
    return {f for o in suite.spec.options for f in o.flags}


@pytest.fixture
def typo() -> Iterator[str]:
    """A device name that does not exist; removed should a test make it after all."""
    path = f"/dev/ssdlab-typo-{os.getpid()}"
    assert not os.path.lexists(path)
    try:
        yield path
    finally:
        if os.path.isfile(path) and not os.path.islink(path):
            os.unlink(path)


@pytest.fixture
def trace(tmp_path: Path) -> Path:
    """A fio iolog for the suites that replay one."""
    path = tmp_path / "t.iolog"
    path.write_text("fio version 2 iolog\n/x add\n/x open\n/x write 0 4096\n/x close\n")
    return path


def _run_args(suite: Suite, option: str, target: str, trace: Path) -> list[str]:
    """``run SUITE OPTION TARGET`` and what the suite needs besides (a size, a trace)."""
    flags = _flags(suite)
    args = ["run", suite.name, option, target]
    args += ["--size", "64MiB"] if "--size" in flags else []
    args += ["--trace", str(trace)] if "--trace" in flags else []
    return args


def _work_dirs(where: str) -> list[str]:
    return sorted(n for n in os.listdir(where) if n.startswith("ssdlab"))


def test_every_suite_refuses_a_mistyped_device_and_makes_nothing(
    typo: str, tmp_path: Path, trace: Path
) -> None:
    store = tmp_path / "s.sqlite"
    kinds = set()
    dev_before = _work_dirs("/dev")
    for suite in runnable():
        kind = suite.spec.target
        kinds.add(kind)
        tries: list[tuple[list[str], str]] = []
        if kind in (TargetKind.DEVICE, TargetKind.DEVICE_OR_DIR):
            tries.append((_run_args(suite, "--target", typo, trace), NOT_A_DEVICE))
        if kind in (TargetKind.DIR, TargetKind.DEVICE_OR_DIR):
            tries.append((_run_args(suite, "--dir", "/dev", trace),
                          "--dir /dev: it is under /dev"))
        if kind is TargetKind.MEMBERS:
            tries.append((["run", suite.name, "--members", f"{typo}a,{typo}b", "--levels",
                           "0"], "does not exist"))
        assert tries, f"{suite.name}: a target kind this test does not know: {kind}"
        for args in tries:
            done = ssdlab_in_process(*args[0], "--store", str(store))
            assert done.returncode == 3, (args, done.stderr)
            assert args[1] in one_line_error(done), args
            assert not os.path.lexists(typo) and not store.exists(), args
    assert kinds == set(TargetKind)  # every kind of target was tried
    assert _work_dirs("/dev") == dev_before


def test_the_command_itself_refuses_it_with_exit_code_3(typo: str, tmp_path: Path) -> None:
    """The issue's own command line, as a user runs it (a process of its own)."""
    done = ssdlab("run", "pts", "--target", typo, "--size", "64MiB", "--store",
                  str(tmp_path / "s.sqlite"))
    assert done.returncode == 3
    line = one_line_error(done)
    assert line == (f"Error: target {typo} is not a block device (no such device); it is "
                    "under /dev, and ssdlab makes no test file in /dev, /proc, /sys or /run "
                    "(/dev/shm excepted): check the device's name (lsblk), or give a file "
                    "path elsewhere")
    assert not os.path.lexists(typo) and not (tmp_path / "s.sqlite").exists()


def test_a_set_with_a_mistyped_device_is_refused_whole(typo: str, tmp_path: Path) -> None:
    good = tmp_path / "a.img"
    for args in (["--target", str(good), "--target", typo],
                 ["--target", typo, "--target", str(good)]):
        done = ssdlab_in_process("run", "pts", *args, "--size", "64MiB", *PTS, "--store",
                                 str(tmp_path / "s.sqlite"))
        assert done.returncode == 3, done.stderr
        assert NOT_A_DEVICE in one_line_error(done)
        assert not os.path.lexists(typo) and not good.exists()
        assert not (tmp_path / "s.sqlite").exists()


@pytest.mark.parametrize("where", ["/dev/ssdlab-typo-{pid}", "/proc/ssdlab-typo-{pid}",
                                   "/sys/ssdlab-typo-{pid}", "/run/ssdlab-typo-{pid}"])
def test_a_link_into_a_system_tree_is_refused(where: str, tmp_path: Path) -> None:
    leads_to = where.format(pid=os.getpid())
    link = tmp_path / "disk"
    link.symlink_to(leads_to)
    done = ssdlab_in_process("run", "pts", "--target", str(link), "--size", "64MiB",
                             "--store", str(tmp_path / "s.sqlite"))
    assert done.returncode == 3, done.stderr
    line = one_line_error(done)
    assert NOT_A_DEVICE in line and f"it leads to {leads_to}" in line
    assert not os.path.lexists(leads_to) and not (tmp_path / "s.sqlite").exists()


def test_dev_shm_is_the_place_for_files_in_ram_also_through_a_link(
    shm_dir: Path, tmp_path: Path
) -> None:
    """A real run with real fio on a test file in /dev/shm, named through a link."""
    link = tmp_path / "ram"
    link.symlink_to(shm_dir)
    store = tmp_path / "s.sqlite"
    done = ssdlab("run", "pts", "--target", str(link / "t.img"), "--size", "64MiB", *PTS,
                  "--store", str(store))
    assert done.returncode == 0, done.stderr + done.stdout[-2000:]
    assert (shm_dir / "t.img").is_file() and "run " in done.stdout and " complete" in done.stdout


def test_a_foreign_file_is_refused_as_foreign_by_every_suite(
    tmp_path: Path, trace: Path
) -> None:
    """A 770 KiB file ssdlab did not make, with no --size: the refusal says it is not
    ssdlab's (docs/safety.md), never "--size 770.3 KiB"; the file is left as it was."""
    foreign = tmp_path / "foreign.bin"
    foreign.write_bytes(os.urandom(FOREIGN_BYTES))
    before = sha256_of(foreign)
    for suite in runnable():
        if suite.spec.target not in (TargetKind.DEVICE, TargetKind.DEVICE_OR_DIR):
            continue
        args = ["run", suite.name, "--target", str(foreign)]
        args += ["--trace", str(trace)] if "--trace" in _flags(suite) else []
        done = ssdlab_in_process(*args, "--store", str(tmp_path / "s.sqlite"))
        line = one_line_error(done)
        assert done.returncode == 3, (suite.name, line)
        assert "was not created by ssdlab" in line and "--size" not in line, (suite.name, line)
    assert sha256_of(foreign) == before and not (tmp_path / "s.sqlite").exists()


def test_an_ssdlab_file_too_small_for_a_preset_says_its_own_size(tmp_path: Path) -> None:
    small = tmp_path / "small.img"
    create_file_target(str(small), 788_480)  # 770 KiB
    presets = [s for s in runnable() if s.run_module == "block_preset_run"]
    assert len(presets) >= 3
    for suite in presets:
        done = ssdlab_in_process("run", suite.name, "--target", str(small), "--store",
                                 str(tmp_path / "s.sqlite"))
        line = one_line_error(done)
        assert done.returncode == 3, (suite.name, line)
        assert line.startswith(f"Error: the test file {small} is 770 KiB and no --size was "
                               "given: the test file must be 16 MiB"), line
    assert small.stat().st_size == 788_480


def test_dry_run_refuses_it_too(typo: str) -> None:
    result = ssdlab_in_process("run", "pts", "--target", typo, "--size", "64MiB", "--dry-run")
    assert result.returncode == 3 and NOT_A_DEVICE in one_line_error(result)
    assert not os.path.lexists(typo)
