"""fio job-file text from typed specs. Pure functions: same spec, same text."""

from __future__ import annotations

from collections.abc import Sequence

from ssdlab.engine.jobtext import Job, JobFile, JobText, comment, option
from ssdlab.plan.specs import NBD_ENGINE, CellSpec, FioJob, JobSection, Pattern, is_nbd_uri
from ssdlab.units import fio_time

#: fio's jobs as threads of the one fio process, not forked processes: when ssdlab is
#: SIGKILLed the kernel kills fio (PR_SET_PDEATHSIG), and forked job processes would be
#: left behind, orphaned and waiting on a futex forever (20 kills left 40 of them)
THREAD = "thread=1"


def _percentile_list(percentiles: tuple[float, ...]) -> str:
    return ":".join(f"{p:g}" for p in percentiles)


#: how fio makes random offsets: a fresh sequence every run, no map of the blocks done
RANDOM_OFFSETS = ("randrepeat=0", "norandommap=1", "random_generator=tausworthe64")


def global_section(job: FioJob) -> list[str]:
    """The ``[global]`` section. A job without a target (a trace replay: its section says
    what is read and where it goes) names no file and no random-offset generator. An NBD
    export is reached through fio's nbd engine: ``uri=`` instead of ``filename=``."""
    on_target = job.target_path is not None
    nbd = is_nbd_uri(job.target_path)
    lines = ["[global]"]
    if on_target:
        lines.append(f"{'uri' if nbd else 'filename'}={job.target_path}")
    lines += [f"ioengine={NBD_ENGINE if nbd else job.ioengine}", f"direct={int(job.direct)}",
              "group_reporting=1", THREAD]
    if on_target:
        lines += RANDOM_OFFSETS
    lines += ["lat_percentiles=1", f"percentile_list={_percentile_list(job.percentiles)}"]
    lines += [f"{key}={value}" for key, value in job.extra_global]
    return lines


def _mix_lines(cell: CellSpec) -> list[str]:
    lines = [f"rw={cell.fio_rw}"]
    if 0 < cell.mix.read_pct < 100:
        lines.append(f"rwmixread={cell.mix.read_pct}")
    return lines


def _region_lines(cell: CellSpec) -> list[str]:
    """Random cells share the whole active range; sequential threads each get a slice."""
    if cell.pattern is Pattern.SEQUENTIAL and cell.threads > 1:
        chunk = cell.size_bytes // cell.threads
        chunk -= chunk % cell.block_bytes
        if chunk <= 0:
            raise ValueError(
                f"{cell.name}: {cell.threads} threads do not fit a "
                f"{cell.block_bytes}-byte block each in the active range"
            )
        return [
            f"offset={cell.offset_bytes}",
            f"size={chunk}",
            f"offset_increment={chunk}",
        ]
    return [f"offset={cell.offset_bytes}", f"size={cell.size_bytes}"]


def _duration_lines(cell: CellSpec) -> list[str]:
    if cell.runtime_s is not None:
        lines = ["time_based=1", f"runtime={fio_time(cell.runtime_s)}"]
        if cell.ramp_s > 0:
            lines.append(f"ramp_time={fio_time(cell.ramp_s)}")
        return lines
    assert cell.io_bytes is not None
    per_thread = cell.io_bytes // cell.threads
    return [f"io_size={per_thread}"]


def cell_section(cell: CellSpec) -> list[str]:
    return [
        f"[{cell.name}]",
        "stonewall",
        *_mix_lines(cell),
        f"bs={cell.block_bytes}",
        f"iodepth={cell.iodepth}",
        f"numjobs={cell.threads}",
        *_region_lines(cell),
        *_duration_lines(cell),
    ]


def section_lines(section: JobSection) -> list[str]:
    return [f"[{section.name}]", *(f"{key}={value}" for key, value in section.options)]


def render(job: FioJob, header: str = "") -> JobText:
    """The complete job file, carrying its jobs (a :class:`JobText`: who runs it need not
    read it back). ``header`` becomes leading ``;`` comment lines."""
    head = [f"; {line}" for line in header.splitlines()]
    glob, *sections = [global_section(job), *map(cell_section, job.cells),
                       *map(section_lines, job.sections)]
    lines = [*head, *glob]
    for section in sections:
        lines += ["", *section]
    return JobText("\n".join(lines) + "\n", _job_file(head, glob, sections))


def _job_file(head: Sequence[str], glob: Sequence[str], sections: Sequence[Sequence[str]]
              ) -> JobFile:
    """What fio (and :func:`~ssdlab.engine.jobtext.parse_job_file`) reads from the lines
    :func:`render` writes: the header, then each job with the global options first."""
    shared = tuple(option(line) for line in glob[1:])
    return JobFile(tuple(comment(line) for line in head),
                   tuple(Job(section[0].strip()[1:-1].strip(),
                             (*shared, *(option(line) for line in section[1:])))
                         for section in sections))
