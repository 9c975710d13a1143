"""Recorded benchmark results (every file in bench/results/) hold no absolute path of the
machine they ran on: they read the same whoever recorded them, wherever.

What counts as such a path: anything absolute with a directory in it, which names the
checkout (``/work/main/bench/results``, ``/home/x/ssdlab``), a temporary file
(``/tmp/ssdlab-bench-x/store.sqlite``, ``/dev/shm/...``) or where a program is installed
(``/usr/bin/fio``: record ``fio`` and its version). What does not: a device node
(``/dev/zram1``: the device measured, named in the job files as fio saw it) and the
kernel's own files (``/proc/...``, ``/sys/...``), the same on every Linux machine.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

RESULTS = Path(__file__).resolve().parents[2] / "bench" / "results"

#: an absolute path: a "/" at the start of a word (not inside "MB/s", "100/0", a URL or a
#: relative path), a name, and at least one more "/": "/x" alone is too often not a path
_ABSOLUTE = re.compile(r"(?<![\w.~/:%)\]-])/[\w.+@-]+(?:/[\w.+@-]*)+")
_NOT_OF_THE_MACHINE = re.compile(r"/dev/(?!shm/)[\w.+-]+|/(?:proc|sys)/[\w.+@/-]*")


def machine_paths(text: str) -> list[str]:
    """The absolute paths of a machine in ``text``."""
    return [m.group() for m in _ABSOLUTE.finditer(text)
            if not _NOT_OF_THE_MACHINE.fullmatch(m.group())]


@pytest.mark.parametrize("text", [
    '"results_dir": "/work/main/bench/results"',
    '"/usr/bin/fio",',
    "--store /tmp/ssdlab-bench-n3es7z5r/store.sqlite",
    "with `/usr/bin/chromium-headless-shell`.",
    "--target=/dev/shm/ssdlab-x/disk.img",
    "(/root/.cache/x)",
    "'/home/me/ssdlab/bench'",
    "/dev/shm/x",
    "/dev/disk/by-id/nvme-x",
])
def test_a_machine_path_is_found(text: str) -> None:
    assert machine_paths(text)


@pytest.mark.parametrize("text", [
    '"results_dir": "bench/results"',
    "filename=/dev/zram1\\nioengine=libaio",
    "--target /dev/zram1 --fio fio --store STORE",
    "reads /proc/stat and /sys/class/zram-control/hot_add",
    "4 KiB 100/0 at 1,041 MiB/s, 1/t_ctrl per second",
    "[results/harness_overhead.md](results/harness_overhead.md)",
    "https://github.com/axboe/fio/blob/master/t/steadystate_tests.py",
    "ssdlab / by hand = 0.98",
])
def test_what_is_not_a_machine_path(text: str) -> None:
    assert machine_paths(text) == []


def test_no_recorded_result_holds_a_path_of_the_machine() -> None:
    files = sorted(path for path in RESULTS.rglob("*") if path.is_file())
    assert files, f"no recorded results in {RESULTS}"
    found = [f"{path.relative_to(RESULTS)}:{number}: {found}"
             for path in files
             for number, line in enumerate(
                 path.read_bytes().decode(errors="replace").splitlines(), 1)
             for found in machine_paths(line)]
    assert not found, ("a recorded result names a path of the machine it ran on (record it "
                       "relative to the repository or by name: bench/recording.py):\n"
                       + "\n".join(found))
