"""fio's status line (engine/status.py): parsed from real fio 3.33 output, kept out of the
results, carried by the ticks (the live line made of it: test_progress.py)."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from ssdlab.engine.status import (
    ETA_OPTIONS,
    FioStatus,
    OutputReader,
    Tick,
    parse_status,
    position_of,
    status_of,
)

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "fio" / "3.33"
UNITS = {"": 1, "k": 1e3, "M": 1e6, "G": 1e9, "Ki": 2**10, "Mi": 2**20, "Gi": 2**30}


def _lines(name: str) -> list[str]:
    text = (FIXTURES / name).read_bytes().decode()  # not read_text: it turns \r into \n
    return [seg.strip("\n") for seg in text.split("\r") if seg.strip()]


def _value(text: str) -> float:
    """A number of fio's with its unit, read independently of the module under test."""
    found = re.fullmatch(r"([\d.]+)(Ki|Mi|Gi|k|M|G)?(B/s|bit/s)?", text)
    assert found, text
    value = float(found.group(1)) * UNITS[found.group(2) or ""]
    return value / 8 if found.group(3) == "bit/s" else value


def _expected(line: str) -> tuple[float, float] | None:
    """(IOPS, bytes/s) of a status line: the bracket before `` IOPS]`` and the one
    before it, each direction added up."""
    found = re.search(r"\]\[([^\]]+)\]\[([^\]]+) IOPS\]", line)
    if found is None:
        return None
    bw = sum(_value(p.split("=")[1]) for p in found.group(1).split(","))
    iops = sum(_value(p.split("=")[1]) for p in found.group(2).split(","))
    return iops, bw


@pytest.mark.parametrize("name", ["k_status_lines.stdout", "k_status_lines_kb1000.stdout",
                                  "k_status_lines_bits.stdout"])
def test_every_status_line_of_real_fio_parses(name: str) -> None:
    lines = _lines(name)
    parsed = [(line, parse_status(line)) for line in lines]
    with_rates = [(line, s) for line, s in parsed if s is not None]
    assert len(with_rates) >= 4, lines  # 6 s of cells, a line every 0.5 s from fio's 3rd s
    for line, status in parsed:
        expected = _expected(line)
        if expected is None:  # "Jobs: 0 (f=0)" between cells: no rates
            assert status is None, line
            continue
        assert status is not None, line
        assert status.iops == pytest.approx(expected[0])
        assert status.bytes_per_s == pytest.approx(expected[1])
        assert status.jobs == 4  # randread numjobs=2, randwrite, randrw
        ended = sum(int(n) for n in re.findall(r"_\((\d+)\)", line))
        assert status.jobs_ended == ended
    # the cells end in turn: fio's count of ended jobs never goes back
    ends = [s.jobs_ended for _, s in with_rates]
    assert ends == sorted(ends) and ends[-1] >= 2


def test_lines_that_are_not_status_lines_are_none() -> None:
    for line in ("", "Jobs: 0 (f=0)", "{", "note: both iodepth >= 1 and synchronous I/O",
                 "Jobs: 1 (f=1): [r(1)][-.-%][eta 00m:00s]"):
        assert parse_status(line) is None


def test_the_reader_keeps_results_and_drops_status_lines() -> None:
    """fio's stdout in pieces cut anywhere: every status line is read, the rest kept."""
    status = (FIXTURES / "k_status_lines.stdout").read_bytes()
    stray = b"note: both iodepth >= 1 and synchronous I/O engine are selected\n"
    data = stray + status + b'{\n  "fio version" : "fio-3.33"\n}\n'
    read_end, write_end = os.pipe()
    reader = OutputReader(read_end, statuses=True)
    reader.start()
    for start in range(0, len(data), 7):  # pieces of 7 bytes, as a pipe may deliver them
        os.write(write_end, data[start:start + 7])
    os.close(write_end)
    reader.join()
    os.close(read_end)
    assert "Jobs:" not in reader.text()
    assert reader.text() == (stray + b'{\n  "fio version" : "fio-3.33"\n}\n').decode()
    last = [parse_status(line) for line in _lines("k_status_lines.stdout")]
    assert reader.status == [s for s in last if s is not None][-1]


def test_ticks_are_floats_that_carry_the_status() -> None:
    status = FioStatus(1000.0, 4e6, 1, 4)
    tick = Tick(2.5, status, 3)
    assert tick == 2.5 and tick + 1 == 3.5 and isinstance(tick, float)
    assert status_of(tick) is status and position_of(tick) == 3
    assert status_of(2.5) is None and position_of(2.5) is None
    assert "--eta=always" in ETA_OPTIONS
