"""One fio run for a set of targets: their job files merged into one, and fio's output
split back per target (docs/sets.md). Pure functions.

**Merging.** Each target's job file is read as fio reads it: every ``[global]`` option
applies to the jobs after it, so each job gets the global options before it, then its
own (fio's later ``[global]`` sections do not reset earlier ones: the globals are never
concatenated, they are flattened into the jobs). A job's name gets its target's tag
(``t1.iops_bs4096_r100``). A target's jobs fall into *positions*: a new one starts at each
``stonewall``. The merged file runs position k of every target at once: the first job of
the position keeps its ``stonewall``, the first job of every other target's position k
loses it and gets ``new_group`` instead, so that ``group_reporting`` never merges two
targets' jobs into one reporting group.

**Logs.** fio names a job's log files by the job's thread number in the fio process
(``NAME_iops.N.log``), which the merged file changes. A log option's name gets the
target's tag too, and :func:`log_moves` says which file each target's own run would have
written (the executor moves them there when fio has ended).

**Splitting.** Each target gets a :class:`~ssdlab.engine.runner.FioRun` of its own: its
own job file, fio's JSON document with only its jobs (under their own names) and an
``"ssdlab set"`` key naming the shared run and holding the merged job file, the lines of
stderr and stray stdout that do not name another target's jobs or files, and its error:
its own jobs' errors, else whatever stopped the whole run.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ssdlab.engine.jobtext import (
    SECTION,
    STONEWALL,
    Job,
    JobFile,
    JobText,
    comment,
    job_file_of,
    option,
    positions,
)
from ssdlab.engine.model import JobResult
from ssdlab.engine.parser import FioOutputError, parse_fio_output
from ssdlab.engine.runner import FioRun

if TYPE_CHECKING:
    from ssdlab.jsonrecord import JsonObject, JsonValue

#: the key of each target's part of the output that says which shared run it came from
SET_KEY = "ssdlab set"
#: options that make fio write a log named by the job's thread number
LOG_OPTIONS = ("write_iops_log", "write_bw_log", "write_lat_log", "write_hist_log")
_OPTION_LINE = re.compile(r"^[A-Za-z0-9_.]+(=.*)?$")
_LOG_FILE = re.compile(r"(?P<kind>[a-z_]+?)(?:\.(?P<n>\d+))?\.log(?P<ext>.*)")


# -- merging ---------------------------------------------------------------------------


@dataclass(frozen=True)
class LogMove:
    """A log of one target's jobs: fio writes ``merged_prefix``, the target's own run
    would have written ``prefix``; thread numbers (merged run, the target's own run)."""

    merged_prefix: str
    prefix: str
    threads: tuple[tuple[int, int], ...]


@dataclass(frozen=True)
class Member:
    """One target's part of a merged job file."""

    tag: str  # "t1": its job names start with "t1."
    job_text: str  # its own job file
    jobs: tuple[str, ...]  # its jobs' own names
    files: tuple[str, ...]  # the files its jobs name (``filename=``)
    logs: tuple[LogMove, ...] = ()

    @property
    def prefix(self) -> str:
        return f"{self.tag}."


@dataclass(frozen=True)
class MergedJob:
    text: str  # the merged job file
    members: tuple[Member, ...]
    note: JsonObject = field(default_factory=dict)  # what each part names the run by


@dataclass
class _Builder:
    """Thread numbers and logs while the merged file is written."""

    thread: int = 0  # the merged run's last thread number
    own: dict[str, int] = field(default_factory=dict)  # each target's last thread number
    logs: dict[tuple[str, str], tuple[str, list[tuple[int, int]]]] = field(
        default_factory=dict)  # (tag, prefix) -> (merged prefix, thread pairs)


def merge_jobs(jobs: Sequence[tuple[str, str]], title: str = "") -> MergedJob:
    """One job file running the job files ``jobs`` ((tag, text) each, tags unique) at
    once, position by position (see the module's documentation)."""
    tags = [tag for tag, _ in jobs]
    if len(set(tags)) != len(tags) or not all(re.fullmatch(r"[A-Za-z0-9]+", t) for t in tags):
        raise ValueError(f"tags must be unique words: {tags}")
    parsed = [job_file_of(text) for _, text in jobs]
    cut = [positions(p.jobs) for p in parsed]
    build = _Builder()
    sections: list[list[str]] = []
    for k in range(max((len(c) for c in cut), default=0)):
        first = True
        for tag, member in zip(tags, cut, strict=True):
            if k < len(member):
                sections += [_section(tag, job, build, lead=j == 0, first=first)
                             for j, job in enumerate(member[k])]
                first = False
    head = [f"; {line}" for line in title.splitlines()]
    for (tag, _), p in zip(jobs, parsed, strict=True):
        head += [f"; {tag}: {line}" for line in p.comments]
    members = tuple(_member(tag, text, p, build) for (tag, text), p in zip(jobs, parsed,
                                                                         strict=True))
    text = "\n".join([*head, *("\n" + "\n".join(s) for s in sections)]) + "\n"
    read = JobFile(tuple(map(comment, head)),
                   tuple(Job(s[0][1:-1], tuple(map(option, s[1:]))) for s in sections))
    return MergedJob(JobText(text, read), members)


def _member(tag: str, text: str, parsed: JobFile, build: _Builder) -> Member:
    files = sorted({f for job in parsed.jobs for f in (job.value("filename") or "").split(":")
                    if f})
    logs = tuple(LogMove(merged, prefix, tuple(pairs))
                 for (t, prefix), (merged, pairs) in build.logs.items() if t == tag)
    return Member(tag, text, tuple(j.name for j in parsed.jobs), tuple(files), logs)


def _section(tag: str, job: Job, build: _Builder, *, lead: bool, first: bool) -> list[str]:
    """A job's section in the merged file; ``lead``: the first of its target's position,
    ``first``: of the position's first target."""
    options = [o for o in job.options if o[0] not in STONEWALL]
    if lead and first and job.has_flag(STONEWALL):
        options.insert(0, ("stonewall", None))
    elif lead and not first:
        options.insert(0, ("new_group", None))
    numbers = [(build.thread + n, build.own.get(tag, 0) + n) for n in range(1, job.threads + 1)]
    build.thread += job.threads
    build.own[tag] = build.own.get(tag, 0) + job.threads
    lines = [f"[{tag}.{job.name}]"]
    for key, value in options:
        if key == "wait_for" and value:
            value = f"{tag}.{value}"
        elif key in LOG_OPTIONS:
            prefix = value or job.name
            merged = f"{prefix}.{tag}" if value else f"{tag}.{job.name}"
            build.logs.setdefault((tag, prefix), (merged, []))[1].extend(numbers)
            value = merged
        lines.append(key if value is None else f"{key}={value}")
    return lines


def log_moves(log: LogMove, names: Iterable[str]) -> list[tuple[str, str]]:
    """(file fio wrote, file the target's own run would have written) of ``log``, given
    the ``names`` of the files in its directory."""
    where, base = os.path.split(log.merged_prefix)
    own_dir, own_base = os.path.split(log.prefix)
    numbers = dict(log.threads)
    moves = []
    for name in sorted(names):
        if not name.startswith(base + "_"):
            continue
        match = _LOG_FILE.fullmatch(name[len(base) + 1:])
        if match is None:
            continue
        local = numbers.get(int(match["n"])) if match["n"] else None
        if match["n"] and local is None:
            continue
        number = "" if local is None else f".{local}"
        moves.append((os.path.join(where, name),
                      os.path.join(own_dir, f"{own_base}_{match['kind']}{number}.log"
                                   f"{match['ext']}")))
    return moves


# -- splitting -------------------------------------------------------------------------


def split_run(run: FioRun, merged: MergedJob) -> dict[str, FioRun]:
    """Each target's own :class:`FioRun` of the merged ``run``, by tag."""
    failed = _failed_tags(run, merged)
    return {m.tag: _member_run(run, merged, m, failed) for m in merged.members}


def _owner(name: str, merged: MergedJob) -> Member | None:
    return next((m for m in merged.members if name.startswith(m.prefix)), None)


def _failed_tags(run: FioRun, merged: MergedJob) -> set[str]:
    """The targets with a job fio reports an error for."""
    if run.output is None:
        return set()
    return {m.tag for job in run.output.jobs if job.error
            for m in [_owner(job.name, merged)] if m is not None}


def _member_run(run: FioRun, merged: MergedJob, member: Member, failed: set[str]) -> FioRun:
    others = [m for m in merged.members if m is not member]
    stderr = own_lines(run.stderr, member, others)
    documents = run.output.documents if run.output is not None else ()
    if not documents:
        return FioRun(member.job_text, run.command, run.stdout, stderr, run.returncode,
                      run.started_at, run.ended_at, run.timed_out, None,
                      run.error or "fio printed no results")
    stray = own_lines(run.output.stray_text, member, others) if run.output else ""
    parts = [_member_document(d, merged, member) for d in documents]
    stdout = stray + "\n".join(json.dumps(p, indent=2) for p in parts) + "\n"
    try:
        output = parse_fio_output(stdout)
    except FioOutputError as exc:
        return FioRun(member.job_text, run.command, stdout, stderr, run.returncode,
                      run.started_at, run.ended_at, run.timed_out, None, exc.message)
    error = _member_error(run, output.jobs, failed)
    return FioRun(member.job_text, run.command, stdout, stderr, run.returncode,
                  run.started_at, run.ended_at, run.timed_out, output, error)


def _member_error(run: FioRun, jobs: Sequence[JobResult], failed: set[str]) -> str | None:
    """Why this target's part is not a measurement (None: it is)."""
    if run.timed_out:
        return run.error
    bad = [job for job in jobs if job.error]
    if bad:
        return f"fio job {bad[0].name} failed: error {bad[0].error} ({os.strerror(bad[0].error)})"
    if not jobs:
        return "fio printed no results for this target"
    if run.error is not None and not failed:
        return run.error  # not another target's job: it concerns every target
    return None


def _member_document(document: Mapping[str, JsonValue], merged: MergedJob, member: Member
                     ) -> JsonObject:
    """fio's document with only ``member``'s jobs, under their own names."""
    out: JsonObject = {}
    for key, value in document.items():
        if key == "jobs" and isinstance(value, list):
            value = [_renamed(job, member) for job in value if isinstance(job, dict)
                     and str(job.get("jobname", "")).startswith(member.prefix)]
        elif key == "disk_util" and isinstance(value, list):
            disks = {os.path.basename(f) for f in member.files}
            value = [d for d in value if isinstance(d, dict) and d.get("name") in disks]
        out[key] = value
    out[SET_KEY] = {**merged.note, "tag": member.tag, "targets": len(merged.members),
                    "job_file": merged.text}
    return out


def _renamed(job: JsonObject, member: Member) -> JsonObject:
    return {**job, "jobname": str(job["jobname"])[len(member.prefix):]}


def own_lines(text: str, member: Member, others: Sequence[Member]) -> str:
    """The lines of ``text`` that name none of ``others``' jobs or files (unless they name
    ``member``'s too), with ``member``'s job names as in its own job file."""
    foreign = [m.prefix + j for m in others for j in m.jobs] + [f for m in others
                                                               for f in m.files]
    own = [member.prefix + j for j in member.jobs] + list(member.files)
    kept = []
    for line in text.splitlines(keepends=True):
        if any(f in line for f in foreign) and not any(o in line for o in own):
            continue
        for job in member.jobs:
            line = line.replace(member.prefix + job, job)
        kept.append(line)
    return "".join(kept)


# -- the dry run -----------------------------------------------------------------------


def first_job_file(text: str) -> str | None:
    """The first fio job file in a plan's text (``--dry-run``): from the comment lines
    heading its first section to the last line that is fio's."""
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if SECTION.match(line.strip())), None)
    if start is None:
        return None
    while start > 0 and lines[start - 1].startswith(";"):
        start -= 1
    end = start
    for i in range(start, len(lines)):
        line = lines[i].strip()
        if line and not (line.startswith((";", "#")) or SECTION.match(line)
                         or _OPTION_LINE.match(line)):
            break
        end = i + 1
    return "\n".join(lines[start:end]).strip() + "\n"
