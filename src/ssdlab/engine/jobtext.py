"""A fio job file as fio reads it: the comments before the first section, then the jobs,
each with the ``[global]`` options before it flattened in, and the jobs cut into
*positions* at every ``stonewall``. Pure: the gate (``gate.py``), the merge of a set's job
files (``jobmerge.py``) and the member sampler read job files through it.

A job file ssdlab writes (``jobfile.render``, ``jobmerge.merge_jobs``) is a
:class:`JobText`: its text, carrying the jobs it holds, so that whoever runs it reads
them without parsing the text back (:func:`job_file_of`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

#: an option of a job: (key, value); a flag (``stonewall``) has no value
Option = tuple[str, str | None]

#: the options that start a new position (fio waits for the jobs before)
STONEWALL = ("stonewall", "wait_for_previous")
#: a section's head: ``[name]``
SECTION = re.compile(r"^\[(?P<name>[^\]]+)\]$")


class JobFileError(ValueError):
    """A job file ssdlab cannot merge (an option outside any section)."""


@dataclass(frozen=True)
class Job:
    """One job of a job file, with every global option before it flattened in."""

    name: str
    options: tuple[Option, ...]

    def value(self, key: str) -> str | None:
        """The option's last value (None: not given, or a flag)."""
        found = [v for k, v in self.options if k == key]
        return found[-1] if found else None

    def has_flag(self, keys: Iterable[str]) -> bool:
        wanted = set(keys)
        flags = [v for k, v in self.options if k in wanted]
        return bool(flags) and flags[-1] in (None, "1", "true")

    @property
    def threads(self) -> int:
        """fio's threads (or processes) of the job: ``numjobs``."""
        value = self.value("numjobs")
        return int(value) if value is not None and value.isdigit() and int(value) > 0 else 1


@dataclass(frozen=True)
class JobFile:
    comments: tuple[str, ...]  # the comment lines before the first section, unmarked
    jobs: tuple[Job, ...]


class JobText(str):
    """A job file's text that carries what :func:`parse_job_file` reads from it
    (:attr:`jobfile`), made when the text was written. It is the text in every other way:
    stored, printed, compared and run as it is."""

    jobfile: JobFile

    def __new__(cls, text: str, jobfile: JobFile) -> JobText:
        made = super().__new__(cls, text)
        made.jobfile = jobfile
        return made

    def __reduce__(self) -> tuple[type[JobText], tuple[str, JobFile]]:
        return JobText, (str(self), self.jobfile)


def job_file_of(text: str) -> JobFile:
    """The jobs of a job file: those a :class:`JobText` carries, else read from the text
    (JobFileError: an option outside any section)."""
    return text.jobfile if isinstance(text, JobText) else parse_job_file(text)


def option(line: str) -> Option:
    """An option line as fio reads it: ``key=value``, or a flag."""
    key, sep, value = line.partition("=")
    return key.strip(), value.strip() if sep else None


def comment(line: str) -> str:
    """A comment line's text as fio reads it (without its ``;`` or ``#``)."""
    return line.strip()[1:].strip()


def parse_job_file(text: str) -> JobFile:
    """A job file as fio reads it: header comments, then the jobs, each with the global
    options before it and then its own."""
    comments: list[str] = []
    globals_: list[Option] = []
    jobs: list[tuple[str, list[Option]]] = []
    current: list[Option] | None = None
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line:
            continue
        if line.startswith((";", "#")):
            if current is None and not jobs:
                comments.append(comment(line))
            continue
        head = SECTION.match(line)
        if head is not None:
            name = head["name"].strip()
            current = globals_ if name == "global" else []
            if name != "global":
                jobs.append((name, [*globals_]))
                current = jobs[-1][1]
            continue
        if current is None:
            raise JobFileError(f"job file line {number}: {line!r} is outside any section")
        current.append(option(line))
    return JobFile(tuple(comments), tuple(Job(n, tuple(o)) for n, o in jobs))


def positions(jobs: Sequence[Job]) -> list[list[Job]]:
    """The jobs cut at every ``stonewall``: the jobs of one position run at once."""
    out: list[list[Job]] = []
    for job in jobs:
        if not out or job.has_flag(STONEWALL):
            out.append([])
        out[-1].append(job)
    return out
