"""The dashboard's web application (Starlette) and its server (uvicorn).

Pages are static files of the package (``assets/``: HTML, vanilla JavaScript, CSS and the
vendored uPlot); they read JSON from ``/api/...`` and follow live changes through
server-sent events, which poll the store about once a second per stream. Each request,
and each poll of a stream, opens the store on its own (in a worker thread) and closes it.
Nothing is written to the store. A finished run's report is built on demand (HTML only,
as ``ssdlab report --no-pdf`` writes it) into a private cache directory, removed when
the server stops.

Importing this module needs the ``serve`` extra (Starlette, uvicorn).
"""

from __future__ import annotations

import contextlib
import shutil
import socket
import tempfile
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from types import FrameType
from typing import Any

import anyio
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import FileResponse, PlainTextResponse, Response, StreamingResponse
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from ssdlab.errors import EnvironmentProblem, RunNotFound, UserError
from ssdlab.serve import auth, data, metrics
from ssdlab.serve.data import Location
from ssdlab.store.db import Store

ASSETS = Path(__file__).resolve().parent / "assets"
#: how often a live stream looks at the store
POLL_S = 1.0
#: a comment line this often keeps proxies from closing a quiet stream
KEEPALIVE_S = 15.0
#: a browser reconnects this long after a stream dropped
RETRY_MS = 2000
PAGE_HEADERS = {
    "cache-control": "no-store",
    "content-security-policy": "default-src 'self'; img-src 'self' data:; "
    "style-src 'self' 'unsafe-inline'; frame-ancestors 'none'",
    "x-content-type-options": "nosniff",
    "referrer-policy": "no-referrer",
}
API_HEADERS = {"cache-control": "no-store", "x-content-type-options": "nosniff"}


def _json(text: str, status: int = 200) -> Response:
    return Response(text, status, API_HEADERS, media_type="application/json")


def _error(exc: UserError) -> Response:
    status = 404 if isinstance(exc, RunNotFound) else 400
    return _json(data.to_json({"error": exc.message}), status)


class ReportCache:
    """Finished runs' HTML reports, built once per run (and again after a resume)."""

    def __init__(self, location: Location) -> None:
        self.location = location
        self.directory = Path(tempfile.mkdtemp(prefix="ssdlab-serve-reports-"))
        self._lock = threading.Lock()

    def html(self, run_id: str) -> Path | str:
        """The report file of the finished run ``run_id``, or why there is none."""
        from ssdlab.report.build import ReportRequest, write_report
        with self._lock, contextlib.closing(data.open_store_readonly(self.location)) as store:
            run_id = store.resolve(run_id)  # no store yet: RunNotFound
            assert isinstance(store, Store)
            summary = next(r for r in store.list_runs() if r.run_id == run_id)
            if summary.status == "running":
                return "the run is still running: its report is made when it ends"
            out = self.directory / f"{run_id}-{summary.finished_at}"
            if not (out / "report.html").exists():
                write_report(store, ReportRequest((run_id,), out, pdf=False))
            return out / "report.html"

    def remove(self) -> None:
        shutil.rmtree(self.directory, ignore_errors=True)


def _read(location: Location, read: Callable[[Any], Any]) -> Any:
    with contextlib.closing(data.open_store_readonly(location)) as store:
        return read(store)


class Dashboard:
    """The endpoints, each reading the store at ``location`` on its own."""

    def __init__(self, location: Location, poll_s: float,
                 stopping: threading.Event) -> None:
        self.location = location
        self.poll_s = poll_s
        #: set when the server stops: live streams end, so that it can
        self.stopping = stopping
        self.reports = ReportCache(location)

    @staticmethod
    def page(name: str) -> Callable[[Request], Response]:
        def endpoint(request: Request) -> Response:
            return FileResponse(ASSETS / name, headers=PAGE_HEADERS)
        return endpoint

    def _api(self, read: Callable[[Any], Any]) -> Response:
        try:
            return _json(data.to_json(_read(self.location, read)))
        except UserError as exc:
            return _error(exc)

    def api_runs(self, request: Request) -> Response:
        filters = {k: request.query_params.get(k, "") for k in data.FILTERS}
        return self._api(lambda s: data.runs_list(s.list_runs(), filters))

    def api_run(self, request: Request) -> Response:
        ref = request.path_params["run_id"]
        return self._api(lambda s: data.run_view(data.load_run(s, ref)))

    def metrics(self, request: Request) -> Response:
        try:
            text = _read(self.location, metrics.collect)
        except UserError as exc:
            return PlainTextResponse(f"# error: {exc.message}\n", 503)
        return Response(text, headers={"cache-control": "no-store"},
                        media_type=metrics.CONTENT_TYPE)

    def report(self, request: Request) -> Response:
        try:
            found = self.reports.html(request.path_params["run_id"])
        except UserError as exc:
            status = 404 if isinstance(exc, RunNotFound) else 400
            return PlainTextResponse(exc.message + "\n", status)
        if isinstance(found, str):
            return PlainTextResponse(found + "\n", 409)
        return FileResponse(found, headers={"cache-control": "no-store"})

    async def stream(self, poll: Callable[[Any], tuple[str, str]]) -> AsyncIterator[str]:
        """Server-sent events: ``poll(store)`` gives (fingerprint, message); the message is
        sent whenever the fingerprint changes (and once at the start)."""
        yield f"retry: {RETRY_MS}\n\n"
        last, quiet = None, 0.0
        while not self.stopping.is_set():
            try:
                fingerprint, message = await anyio.to_thread.run_sync(
                    _read, self.location, poll)
            except UserError as exc:
                yield f"event: problem\ndata: {data.to_json({'error': exc.message})}\n\n"
                return
            if fingerprint != last:
                last, quiet = fingerprint, 0.0
                yield message
            elif quiet >= KEEPALIVE_S:
                quiet = 0.0
                yield ": keep-alive\n\n"
            await anyio.sleep(self.poll_s)
            quiet += self.poll_s

    def live_runs(self, request: Request) -> Response:
        def poll(store: Any) -> tuple[str, str]:
            fingerprint = data.list_fingerprint(store.list_runs())
            return fingerprint, f"event: runs\ndata: {data.to_json(fingerprint)}\n\n"
        return _events(self.stream(poll))

    def live_run(self, request: Request) -> Response:
        ref = request.path_params["run_id"]

        def poll(store: Any) -> tuple[str, str]:
            view = data.run_view(data.load_run(store, ref))
            return view["fingerprint"], f"event: run\ndata: {data.to_json(view)}\n\n"
        return _events(self.stream(poll))

    def routes(self) -> list[Route | Mount]:
        return [
            Route("/", self.page("runs.html")),
            Route("/runs/{run_id}", self.page("run.html")),
            Route("/runs/{run_id}/report", self.report),
            Route("/api/runs", self.api_runs),
            Route("/api/runs/{run_id}", self.api_run),
            Route("/api/live/runs", self.live_runs),
            Route("/api/live/runs/{run_id}", self.live_run),
            Route("/metrics", self.metrics),
            # the report pages name no icon: the browser's request gets an empty answer
            Route("/favicon.ico", lambda request: Response(status_code=204)),
            Mount("/assets", StaticFiles(directory=ASSETS), name="assets"),
        ]


def create_app(location: Location, token: str | None = None, *,
               poll_s: float = POLL_S, stopping: threading.Event | None = None) -> Any:
    """The dashboard of the store at ``location`` behind its gate (:mod:`.auth`): an
    ASGI application. Its live streams end once ``stopping`` is set."""
    dashboard = Dashboard(location, poll_s, stopping or threading.Event())

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        try:
            yield
        finally:
            dashboard.reports.remove()

    return auth.gate(Starlette(routes=dashboard.routes(), lifespan=lifespan), token)


def _events(body: AsyncIterator[str]) -> Response:
    return StreamingResponse(body, media_type="text/event-stream",
                             headers={"cache-control": "no-store", "x-accel-buffering": "no"})


def bind(host: str, port: int) -> socket.socket:
    """A listening socket on ``host``:``port`` (port 0: any free one); UserError when the
    address cannot be had."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM,
                                   flags=socket.AI_PASSIVE)
    except socket.gaierror as exc:
        raise UserError(f"--host {host}: {exc.strerror}") from exc
    family, kind, proto, _, address = infos[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(128)
    except OSError as exc:
        sock.close()
        raise EnvironmentProblem(f"cannot serve on {host}:{port}: {exc.strerror}") from exc
    sock.set_inheritable(True)
    return sock


def url_of(sock: socket.socket) -> str:
    host, port = sock.getsockname()[:2]
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{port}/"


class Server(uvicorn.Server):
    """uvicorn's server, which also tells the live streams to end when it stops (else a
    browser's open stream would hold the graceful shutdown until its timeout)."""

    def __init__(self, config: uvicorn.Config, stopping: threading.Event) -> None:
        super().__init__(config)
        self.stopping = stopping

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        self.stopping.set()
        super().handle_exit(sig, frame)

    def stop(self) -> None:
        self.stopping.set()
        self.should_exit = True


def server_for(location: Location, token: str | None, poll_s: float = POLL_S) -> Server:
    stopping = threading.Event()
    app = create_app(location, token, poll_s=poll_s, stopping=stopping)
    config = uvicorn.Config(app, log_level="warning", access_log=False,
                            timeout_graceful_shutdown=5, lifespan="on")
    return Server(config, stopping)


def serve_forever(location: Location, token: str | None, sock: socket.socket) -> None:
    """Serve until Ctrl-C or SIGTERM (uvicorn stops gracefully, then raises the signal
    again: ``KeyboardInterrupt`` for Ctrl-C)."""
    server_for(location, token).run(sockets=[sock])


@contextlib.contextmanager
def running(location: Location, token: str | None = None, *, host: str = "127.0.0.1",
            poll_s: float = POLL_S) -> Iterator[str]:
    """The dashboard served from a thread on a free port, for tests and benchmarks: its
    URL; stopped on leaving."""
    sock = bind(host, 0)
    server = server_for(location, token, poll_s)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        while not server.started:
            if not thread.is_alive():
                raise RuntimeError("the dashboard's server did not start")
            thread.join(0.02)
        yield url_of(sock)
    finally:
        server.stop()
        thread.join(10)
        sock.close()
