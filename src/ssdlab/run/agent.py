"""``ssdlab agent``: what runs on a host under test when a coordinator drives it.

The coordinator reaches an agent only through ssh (run/remote.py). Every request is one
``ssdlab agent VERB ...`` command that prints one JSON object on stdout: what it found,
or ``{"error": ..., "exit": N}`` with exit status N. The agent's own guardrails decide:
a target this host refuses is refused whatever the coordinator asks, and ``serve``
starts no fio server unless every target it is to serve passed them.

``serve`` starts ``fio --server`` on a Unix socket in a directory only root may enter
(never a TCP port: fio's server has no authentication and runs any job file it is sent,
``exec_prerun`` included), holds every block target exclusively, prints
``{"ready": true, ...}`` and stays until its standard input closes (the ssh connection
ended) or the fio server exits; then it stops the server and removes the socket.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import cast

from ssdlab import __version__
from ssdlab.children import die_with_parent
from ssdlab.engine.startat import MARKS_FILE, Mark, host_marks
from ssdlab.errors import TargetError, UserError
from ssdlab.jsonrecord import JsonObject, Record, StoredDataError
from ssdlab.plan.results import HealthCount, PurgeStep, TruthAnswer
from ssdlab.run.agent_wire import (
    PROTOCOL,
    CheckAnswer,
    ClockAnswer,
    ControlAnswer,
    ErrorAnswer,
    Hello,
    ProbeAnswer,
    Ready,
    Request,
    StartsAnswer,
)
from ssdlab.run.prepare import PreparedTarget, prepare_target
from ssdlab.run.session import boot_id, unreadable
from ssdlab.targets import emulator
from ssdlab.targets.health import read_health
from ssdlab.targets.identity import fio_version, host_info, identify_block
from ssdlab.targets.purge import purge_block
from ssdlab.targets.safety import DestroyData, ExclusiveHold, RealDevices, check_block_target

#: where ``serve`` makes its private socket directories
SOCKET_ROOT = Path("/run/ssdlab-agent")
#: in a ``serve``'s directory: its pid and the targets it holds
HELD_FILE = "held.json"
#: A TEST HOOK, not a setting: the agent's clock, as it reports it (hello, ``clock``
#: answers, the start marks), runs this many seconds ahead of the clock its fio jobs
#: read, as if it were another clock. The coordinator then starts this host's jobs that
#: much late, and must see and name it (tests/integration/test_round_start_real.py).
CLOCK_SHIFT_ENV = "SSDLAB_AGENT_TEST_CLOCK_SHIFT_S"


def _clock_shift_s() -> float:
    try:
        return float(os.environ.get(CLOCK_SHIFT_ENV, "0") or 0)
    except ValueError:
        return 0.0


def now() -> float:
    """This host's clock as the agent reports it (seconds since the epoch)."""
    return time.time() + _clock_shift_s()


def _facts(facts: Mapping[str, object]) -> JsonObject:
    """Facts read on this host (its identity, a target's, a health log) as the JSON
    object a message carries (written with ``default=str``)."""
    return cast(JsonObject, dict(facts))


def hello(fio: str) -> Hello:
    """Who this host is: versions, clock, identity (the coordinator compares them)."""
    try:
        fio_ver = fio_version(fio)
    except UserError as err:
        fio_ver = f"unusable: {err}"
    return Hello(PROTOCOL, __version__, fio_ver, now(), socket.gethostname(),
                 boot_id(), _facts(host_info()))


def check(target: str, destroy_data: DestroyData, fio: str, *, read_only: bool) -> PreparedTarget:
    """Every guardrail of this host on ``target`` (nothing is written)."""
    prepared = prepare_target(target, None, destroy_data, fio, read_only=read_only)
    if prepared.create_file:
        raise TargetError(f"{target} does not exist on {socket.gethostname()}: a target on "
                          "another host must exist (a block device or an ssdlab test file)")
    return prepared


def check_answer(target: str, destroy_data: DestroyData, fio: str, *,
                 read_only: bool) -> CheckAnswer:
    prepared = check(target, destroy_data, fio, read_only=read_only)
    return CheckAnswer(_facts(prepared.info.to_dict()), _facts(prepared.host),
                       dict(prepared.versions), hello(fio))


class _HeldByServe(RealDevices):
    """The devices as they are, but the exclusive hold on them is our own ``serve``'s."""

    def exclusive_open_error(self, path: str) -> str | None:
        return None


def purge(target: str, destroy_data: DestroyData, method: str, offset: int, size: int,
          token: str | None = None) -> PurgeStep:
    """Purge ``target``'s range after this host's guardrails passed again (the exclusive
    open excepted when the ``serve`` of ``token`` holds the target: that hold is ours)."""
    path = os.path.abspath(target)
    info = identify_block(path)
    held = token is not None and path in _held(token)
    check_block_target(info, destroy_data=destroy_data, writes=True,
                       device=_HeldByServe() if held else None)
    done = purge_block(info, method, offset, size)
    return PurgeStep.of(done)


def _held(token: str) -> list[str]:
    """The targets the live ``serve`` of ``token`` holds."""
    try:
        data = json.loads((socket_path(token).parent / HELD_FILE).read_text())
    except (OSError, ValueError):
        return []
    pid = data.get("pid") if isinstance(data, dict) else None
    if not isinstance(pid, int) or not Path(f"/proc/{pid}").exists():
        return []
    targets = data.get("targets")
    return [str(t) for t in targets] if isinstance(targets, list) else []


def truth(target: str) -> TruthAnswer:
    """The emulator's ground truth and the drive's health log (what each can give)."""
    path = os.path.abspath(target)
    emu = emulator.emulator_of(path, _details(path))
    stats = _facts(emulator.stats(emu)) if emu is not None else None
    try:
        reading = read_health(path, _details(path))
    except (TargetError, ValueError) as err:
        return TruthAnswer.partial(emulator=stats, health_error=str(err))
    return TruthAnswer(stats, None if reading is None else HealthCount(
        reading.source, reading.host_bytes_written, reading.resolution_bytes,
        reading.media_bytes_written, reading.media_resolution_bytes))


def control(target: str, command: str) -> ControlAnswer:
    """One control command to the emulated SSD behind ``target``."""
    path = os.path.abspath(target)
    emu = emulator.emulator_of(path, _details(path))
    if emu is None:
        raise TargetError(f"{target} is not an emulated SSD on {socket.gethostname()}")
    emulator.control(emu, command)
    return ControlAnswer(command)


def probe(target: str) -> ProbeAnswer:
    """Whether the target still answers a read (None) or why not."""
    return ProbeAnswer(unreadable(os.path.abspath(target)))


def starts(token: str) -> StartsAnswer:
    """What the jobs' waiters said since the last time (their file is emptied)."""
    marks = socket_path(token).parent / MARKS_FILE
    taken = marks.with_name(MARKS_FILE + ".taken")
    try:
        marks.rename(taken)
    except FileNotFoundError:
        return StartsAnswer([])
    text = taken.read_text(errors="replace")
    taken.unlink()
    shift_ns = round(_clock_shift_s() * 1e9)
    return StartsAnswer([Mark(m.position, m.at_ns, m.began_ns + shift_ns, m.woke_ns + shift_ns)
                         for m in host_marks(text)])


def _details(path: str) -> dict[str, object]:
    """A loop device's backing file (how the emulator behind it is found)."""
    name = os.path.basename(os.path.realpath(path))
    backing = Path(f"/sys/block/{name}/loop/backing_file")
    with contextlib.suppress(OSError):
        return {"backing_file": backing.read_text().strip()}
    return {}


# -- serve ------------------------------------------------------------------------------


def socket_path(token: str) -> Path:
    """The fio server's socket of a coordinator's ``token`` (letters, digits, -)."""
    if not token or not all(c.isalnum() or c == "-" for c in token) or len(token) > 64:
        raise UserError(f"bad agent token {token!r}")
    return SOCKET_ROOT / token / "fio.sock"


def serve(token: str, targets: Sequence[str], destroy_data: DestroyData, fio: str, *,
          read_only: bool) -> int:
    """Check every target, hold them, run ``fio --server`` on a private socket until the
    coordinator goes away. Prints the ready line; returns the exit status."""
    infos = [check(t, destroy_data, fio, read_only=read_only).info for t in targets]
    sock = socket_path(token)
    with contextlib.ExitStack() as stack:
        for info in infos:
            if info.kind == "block":
                stack.enter_context(ExclusiveHold(info.path))
        stack.enter_context(_private_dir(sock.parent))
        (sock.parent / HELD_FILE).write_text(json.dumps(
            {"pid": os.getpid(), "targets": [i.path for i in infos]}))
        # its jobs' exec_prerun output files go to the private directory
        server = subprocess.Popen((fio, f"--server=sock:{sock}"), cwd=sock.parent,
                                  stdin=subprocess.DEVNULL,
                                  stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                  start_new_session=True, preexec_fn=die_with_parent)
        stack.callback(_stop, server)
        if not _wait_for_socket(sock, server):
            error = (server.stderr.read() if server.stderr else b"").decode(errors="replace")
            error = error.strip()
            raise UserError(f"fio --server did not start: {error or 'no socket'}")
        _say(Ready(True, str(sock), server.pid, tuple(i.path for i in infos)))
        _wait_for_end(server, token, destroy_data)
    return 0


@contextlib.contextmanager
def _private_dir(path: Path) -> Iterator[None]:
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    path.mkdir(mode=0o700)
    try:
        yield
    finally:
        shutil.rmtree(path, ignore_errors=True)


def _wait_for_socket(sock: Path, server: subprocess.Popen[bytes]) -> bool:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if sock.is_socket():
            return True
        if server.poll() is not None:
            return False
        time.sleep(0.05)
    return False


def _wait_for_end(server: subprocess.Popen[bytes], token: str, destroy_data: DestroyData
                  ) -> None:
    """Answer the coordinator's requests (one JSON object per line on standard input, one
    answer per line on standard output) until standard input closes (the ssh connection
    ended) or the fio server exits."""
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    signal.signal(signal.SIGHUP, lambda *_: sys.exit(0))
    while server.poll() is None:
        ready, _, _ = select.select([sys.stdin], [], [], 0.2)
        if not ready:
            continue
        line = sys.stdin.readline()
        if line == "":
            return
        _say(answer(line, token, destroy_data))


def answer(line: str, token: str, destroy_data: DestroyData) -> Record:
    """One request of the coordinator to a serving agent, answered."""
    try:
        request = Request.from_json(json.loads(line), "request")
    except (ValueError, StoredDataError) as err:
        return ErrorAnswer(f"bad request ({err})", 2)
    try:
        return _dispatch(request, token, destroy_data)
    except UserError as err:
        return ErrorAnswer(err.message, int(err.exit_code))
    except (KeyError, TypeError, ValueError) as err:
        return ErrorAnswer(f"bad request ({err!r})", 2)


def _dispatch(request: Request, token: str, destroy_data: DestroyData) -> Record:
    verb, target = request.verb, request.target
    if target not in _held(token):
        raise TargetError(f"{target} is not a target this agent serves")
    if verb == "truth":
        return truth(target)
    if verb == "probe":
        return probe(target)
    if verb == "clock":
        return ClockAnswer(now())
    if verb == "starts":
        return starts(token)
    if verb == "control":
        return control(target, _argument(request.command, "command"))
    if verb == "purge":
        return purge(target, destroy_data, _argument(request.method, "method"),
                     int(_argument(request.offset, "offset")),
                     int(_argument(request.size, "size")), token)
    raise UserError(f"unknown request {verb!r}")


def _argument(value: str | None, name: str) -> str:
    """A verb's argument the request must have (KeyError: a bad request)."""
    if value is None:
        raise KeyError(name)
    return value


def _stop(server: subprocess.Popen[bytes]) -> None:
    for sig in (signal.SIGTERM, signal.SIGKILL):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(server.pid, sig)
        try:
            server.wait(timeout=5)
            return
        except subprocess.TimeoutExpired:
            continue


def _say(message: Record) -> None:
    sys.stdout.write(json.dumps(message.to_json()) + "\n")
    sys.stdout.flush()
