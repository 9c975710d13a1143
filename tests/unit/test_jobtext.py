"""A job file ssdlab writes is rendered once: its text (a ``JobText``) carries the jobs
it holds, exactly what ``parse_job_file`` would read from it, so the gate, the set's
merge and the multiplexer's check never parse it back. The text itself is unchanged (the
golden dry runs and exports, tests/unit/test_goldens.py, test_suite_results.py).
"""

from __future__ import annotations

import copy
import dataclasses
import json
import pickle
from pathlib import Path

import pytest

from ssdlab.engine import gate, jobmerge, jobtext, mux
from ssdlab.engine.gate import gate_job
from ssdlab.engine.jobfile import render
from ssdlab.engine.jobmerge import merge_jobs
from ssdlab.engine.jobtext import JobText, job_file_of, parse_job_file
from ssdlab.plan.pts import PtsArgs, build_options, build_pts_tests
from ssdlab.plan.specs import FioJob, JobSection
from ssdlab.run.suite import FioSetup

SETUP = FioSetup("/dev/loop7", "libaio", "9.9", "nvme", "default")
GIB = 2 ** 30
TESTS = build_pts_tests(build_options(PtsArgs(), "nvme", 16), 64 * GIB, 512)


def _pts_rounds() -> list[JobText]:
    """The job file of a round of each test of a default PTS run, as the run writes it."""
    return [SETUP.job_text(t.round_cells, f"{t.name} round 1") for t in TESTS]


def _jobs() -> list[tuple[FioJob, str]]:
    """Job files of every shape render writes, each with a header."""
    wipc = [(FioJob("/dev/nvme0n1", (t.wipc,)), f"{t.name} preconditioning")
            for t in TESTS if t.wipc is not None]
    cell = TESTS[-1].round_cells[0]
    return [*wipc,
            (FioJob("nbd://host/export", (dataclasses.replace(cell, threads=4),)),
             "an NBD export"),
            (FioJob(None, (), sections=(JobSection("replay", (("read_iolog", "/t.log"),
                                                             ("replay_no_stall", "1"))),)),
             "no target: a trace replay\n\n  indented, after a blank line  "),
            (FioJob("/x", (dataclasses.replace(cell, runtime_s=None, io_bytes=GIB),),
                    extra_global=(("write_iops_log", "/tmp/a b"), ("log_avg_msec", "1000"))),
             ""),
            ]


def _no_parse(monkeypatch: pytest.MonkeyPatch) -> None:
    """Reading a job file's text back fails from now on."""
    def refuse(text: str) -> jobtext.JobFile:
        raise AssertionError("a job file ssdlab wrote was parsed back")
    for module in (jobtext, gate, jobmerge, mux):
        if hasattr(module, "parse_job_file"):
            monkeypatch.setattr(module, "parse_job_file", refuse)


def test_a_rendered_job_file_carries_what_parsing_it_reads() -> None:
    texts = [*_pts_rounds(), *(render(job, header) for job, header in _jobs())]
    for text in texts:
        assert isinstance(text, JobText)
        assert text.jobfile == parse_job_file(str(text)), text
    assert any(len(t.jobfile.jobs) > 1 for t in texts)
    assert any(t.jobfile.comments == ("no target: a trace replay", "", "indented, after a "
                                      "blank line") for t in texts)


def test_a_job_text_is_its_text_everywhere() -> None:
    text = _pts_rounds()[0]
    plain = str(text)
    assert text == plain and hash(text) == hash(plain) and type(plain) is str
    assert json.dumps({"job_file": text}) == json.dumps({"job_file": plain})
    for made in (copy.deepcopy(text), pickle.loads(pickle.dumps(text))):
        assert isinstance(made, JobText) and made == text and made.jobfile == text.jobfile
    assert job_file_of(plain) == text.jobfile  # a plain text is read


def test_a_gated_pts_round_is_not_parsed_back(monkeypatch: pytest.MonkeyPatch,
                                              tmp_path: Path) -> None:
    rounds = _pts_rounds()
    expected = [gate_job(str(text), tmp_path) for text in rounds]
    assert any(g is not None for g in expected)
    _no_parse(monkeypatch)
    assert [gate_job(text, tmp_path) for text in rounds] == expected
    with pytest.raises(AssertionError, match="parsed back"):
        gate_job(str(rounds[0]), tmp_path)  # a plain text is still read: the patch holds


def test_a_sets_merge_is_not_parsed_back(monkeypatch: pytest.MonkeyPatch,
                                         tmp_path: Path) -> None:
    a, b = _pts_rounds()[:2]
    members = [("t1", a), ("t2", b)]
    title = "ssdlab set s: fio run 1, shared by 2 targets"
    expected = merge_jobs([(tag, str(text)) for tag, text in members], title)
    assert isinstance(expected.text, JobText)
    assert expected.text.jobfile == parse_job_file(str(expected.text))
    gated = gate_job(str(expected.text), tmp_path)
    assert gated is not None
    _no_parse(monkeypatch)
    assert all(mux._parses(text) for _, text in members)
    merged = merge_jobs(members, title)
    assert merged == expected and str(merged.text) == str(expected.text)
    assert gate_job(merged.text, tmp_path) == gated
