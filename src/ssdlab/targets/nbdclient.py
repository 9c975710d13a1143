"""A minimal NBD client that only reads: the handshake (fixed newstyle, ``NBD_OPT_GO``,
else ``NBD_OPT_EXPORT_NAME``) and ``NBD_CMD_READ`` with simple replies.

ssdlab uses it to look at an export without writing anything: the signature probe of its
first and last sectors, the round-trip time of a small read, and whether the export still
answers after a failed test. fio's own nbd engine (libnbd) does the measured I/O; this
module never sends a write, trim or flush. The protocol is the NBD project's
``doc/proto.md``.
"""

from __future__ import annotations

import contextlib
import socket
import struct
from types import TracebackType

NBDMAGIC = b"NBDMAGIC"
IHAVEOPT = 0x49484156454F5054
OLDSTYLE = 0x00420281861253
FLAG_FIXED_NEWSTYLE = 1
FLAG_NO_ZEROES = 2
OPT_EXPORT_NAME = 1
OPT_GO = 7
REPLY_MAGIC = 0x3E889045565A9
REP_ACK = 1
REP_INFO = 3
REP_ERROR_BIT = 1 << 31
REP_ERR_UNSUP = REP_ERROR_BIT | 1
REP_ERR_TLS_REQD = REP_ERROR_BIT | 5
INFO_EXPORT = 0
REQUEST_MAGIC = 0x25609513
SIMPLE_REPLY_MAGIC = 0x67446698
CMD_READ = 0
CMD_DISC = 2
#: transmission flag: the export is read-only
FLAG_READ_ONLY = 1 << 1


class NbdError(Exception):
    """The server refused, closed the connection or spoke something else than NBD."""


class NbdClient:
    """``with NbdClient.tcp(host, port, export) as nbd: nbd.read(0, 4096)``."""

    def __init__(self, sock: socket.socket, export: str) -> None:
        self.sock = sock
        self.export = export
        self.size = 0
        self.flags = 0
        self._cookie = 0
        try:
            self._handshake()
        except BaseException:
            sock.close()
            raise

    @classmethod
    def tcp(cls, host: str, port: int, export: str, timeout_s: float = 10.0) -> NbdClient:
        sock = socket.create_connection((host, port), timeout=timeout_s)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return cls(sock, export)

    @classmethod
    def unix(cls, path: str, export: str, timeout_s: float = 10.0) -> NbdClient:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(timeout_s)
        try:
            sock.connect(path)
        except BaseException:
            sock.close()
            raise
        return cls(sock, export)

    def __enter__(self) -> NbdClient:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    @property
    def read_only(self) -> bool:
        return bool(self.flags & FLAG_READ_ONLY)

    # -- the handshake -------------------------------------------------------------
    def _handshake(self) -> None:
        if self._recv(8) != NBDMAGIC:
            raise NbdError("not an NBD server (no NBDMAGIC greeting)")
        (style,) = struct.unpack(">Q", self._recv(8))
        if style == OLDSTYLE:
            raise NbdError("an old-style NBD server (no export names): not supported")
        if style != IHAVEOPT:
            raise NbdError("not an NBD server (unknown handshake)")
        (server_flags,) = struct.unpack(">H", self._recv(2))
        client_flags = server_flags & (FLAG_FIXED_NEWSTYLE | FLAG_NO_ZEROES)
        self.sock.sendall(struct.pack(">I", client_flags))
        if client_flags & FLAG_FIXED_NEWSTYLE and self._go():
            return
        self._export_name(bool(client_flags & FLAG_NO_ZEROES))

    def _option(self, option: int, data: bytes) -> None:
        self.sock.sendall(struct.pack(">QII", IHAVEOPT, option, len(data)) + data)

    def _go(self) -> bool:
        """``NBD_OPT_GO``; False when the server does not know it."""
        name = self.export.encode()
        self._option(OPT_GO, struct.pack(">I", len(name)) + name + struct.pack(">H", 0))
        while True:
            magic, _, reply, length = struct.unpack(">QIII", self._recv(20))
            if magic != REPLY_MAGIC:
                raise NbdError("the server's option reply is malformed")
            data = self._recv(length)
            if reply == REP_ACK:
                return True
            if reply == REP_INFO and len(data) >= 12 and data[:2] == b"\0\0":
                self.size, self.flags = struct.unpack(">QH", data[2:12])
            elif reply == REP_ERR_UNSUP:
                return False
            elif reply == REP_ERR_TLS_REQD:
                raise NbdError("the server requires TLS (nbds://), which ssdlab's probe "
                               "does not speak")
            elif reply & REP_ERROR_BIT:
                text = data.decode("utf-8", errors="replace").strip()
                raise NbdError(f"the server refused export {self.export!r}"
                               + (f": {text}" if text else f" (error {reply ^ REP_ERROR_BIT})"))

    def _export_name(self, no_zeroes: bool) -> None:
        self._option(OPT_EXPORT_NAME, self.export.encode())
        try:
            self.size, self.flags = struct.unpack(">QH", self._recv(10))
        except NbdError:
            raise NbdError(f"the server refused export {self.export!r}") from None
        if not no_zeroes:
            self._recv(124)

    # -- transmission --------------------------------------------------------------
    def read(self, offset: int, length: int) -> bytes:
        """``length`` bytes at ``offset`` (a short read past the end of the export)."""
        if offset < 0 or offset >= self.size or length <= 0:
            return b""
        length = min(length, self.size - offset)
        self._cookie += 1
        self.sock.sendall(struct.pack(">IHHQQI", REQUEST_MAGIC, 0, CMD_READ, self._cookie,
                                      offset, length))
        magic, error, cookie = struct.unpack(">IIQ", self._recv(16))
        if magic != SIMPLE_REPLY_MAGIC or cookie != self._cookie:
            raise NbdError("the server's reply to a read is malformed")
        if error:
            raise NbdError(f"the server failed a {length}-byte read at {offset} "
                           f"(error {error})")
        return self._recv(length)

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.sock.sendall(struct.pack(">IHHQQI", REQUEST_MAGIC, 0, CMD_DISC, 0, 0, 0))
        self.sock.close()

    def _recv(self, count: int) -> bytes:
        chunks, left = [], count
        while left:
            chunk = self.sock.recv(left)
            if not chunk:
                raise NbdError("the server closed the connection")
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks)
