"""FastFile mode's server on the local runner: a channel's objects presented at once, fetched on their first open.

:meth:`FastFileServer.present` lays every object of a channel out at its real size and time stamp as a sparse
placeholder; a job's process that opens one asks the server first (:mod:`helpers.standin.fastfile_shim` blocks the
open until then; loopback TCP, one line per request), and the server fetches the object whole from the loopback
store, then the next file in listing order (``READ_AHEAD``) for a sequential reader. SageMaker's FastFile streams
byte ranges as they are read; locally an object arrives whole on its first open.
"""

from __future__ import annotations

import concurrent.futures
import os
import socketserver
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from helpers.standin.store_client import S3Object, Transfer, describe_failure, fetch_object, s3_client

READ_AHEAD = 1  # FastFile: files fetched ahead of a sequential reader


@dataclass
class _Lazy:
    """One presented object: a placeholder until its first open."""

    path: str
    channel: str
    bucket: str
    key: str
    size: int
    modified: float
    scratch: Path
    next: str | None = None  # the next file in listing order (read-ahead)
    state: str = "placeholder"  # placeholder | fetching | ready | failed
    error: str = ""
    done: threading.Event = field(default_factory=threading.Event)


class FastFileServer:
    """Fetches presented objects on demand for the jobs' read-through (loopback TCP, one line per request)."""

    def __init__(self, endpoint: str, read_ahead: int = READ_AHEAD):
        self.endpoint, self.read_ahead = endpoint, read_ahead
        self.client = s3_client(endpoint)
        self.files: dict[str, _Lazy] = {}
        self.fetches: list[dict] = []  # one per object fetched: channel, key, bytes, reason, start, seconds
        self.requests = 0
        self.blocked_s = 0.0  # how long the job's opens waited for bytes, all together
        self._lock = threading.Lock()
        self._closed = False
        self._ahead = concurrent.futures.ThreadPoolExecutor(2, thread_name_prefix="fastfile-read-ahead")
        self.t0 = time.perf_counter()
        server = self

        class Handler(socketserver.StreamRequestHandler):
            def handle(self):
                path = self.rfile.readline().decode("utf-8", "surrogateescape").rstrip("\n")
                try:
                    error = server.ensure(path)
                except Exception as err:  # noqa: BLE001 - the reader gets an error, never a silent "OK"
                    error = f"the FastFile server failed on {path}: {type(err).__name__}: {err}"
                self.wfile.write(b"OK\n" if error is None else f"ERR {error}\n".encode("utf-8", "replace"))

        self.tcp = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Handler)
        self.tcp.daemon_threads = True
        threading.Thread(target=self.tcp.serve_forever, name="fastfile-server", daemon=True).start()

    @property
    def address(self) -> str:
        host, port = self.tcp.server_address[:2]
        assert isinstance(host, str)  # a bound socket's own name for its address; the stubs allow bytes too
        return f"{host}:{port}"

    def present(
        self, channel: str, bucket: str, files: list[tuple[str, S3Object]], dest: Path, scratch: Path
    ) -> Transfer:
        """Every object (``files``: its path under ``dest``, the object) as a placeholder of its real size and time
        stamp: listed at once, no bytes fetched."""
        t0 = time.perf_counter()
        dest.mkdir(parents=True, exist_ok=True)
        previous = None
        for relative, o in files:
            path = dest / relative
            path.parent.mkdir(parents=True, exist_ok=True)
            with open(path, "wb") as f:
                f.truncate(o.size)  # sparse: no disk used until the bytes arrive
            os.utime(path, (o.modified, o.modified))
            lazy = _Lazy(str(path.resolve()), channel, bucket, o.key, o.size, o.modified, scratch)
            self.files[lazy.path] = lazy
            if previous is not None:
                previous.next = lazy.path
            previous = lazy
        return Transfer(0, 0, time.perf_counter() - t0)

    def ensure(self, path: str, reason: str = "open") -> str | None:
        """Make ``path`` hold its bytes; None when it does (or is not a presented object), else why not.

        Only a file whose fetch completed is ever reported ready: a failed fetch, whatever failed, is an error for
        every reader that opens it, then and later."""
        lazy = self.files.get(os.path.realpath(path)) or self.files.get(path)
        if lazy is None:
            return None
        asked = time.perf_counter()
        with self._lock:
            self.requests += reason == "open"
            mine = lazy.state == "placeholder"
            if mine:
                lazy.state = "fetching"
        if mine:
            self._fill(lazy, reason)
        else:
            lazy.done.wait()
        if reason == "open":
            with self._lock:
                self.blocked_s += time.perf_counter() - asked
            if lazy.state == "ready":
                self._read_ahead(lazy)
        if lazy.state == "ready":
            return None
        return lazy.error or f"s3://{lazy.bucket}/{lazy.key} could not be fetched"

    def _fill(self, lazy: _Lazy, reason: str) -> None:
        start = time.perf_counter()
        got = 0
        try:
            got = fetch_object(
                self.client, lazy.bucket, lazy.key, Path(lazy.path), lazy.modified, lazy.scratch, lazy.size
            )
            lazy.state = "ready"
        except BaseException as err:  # anything (even an interrupt) leaves the file failed, never "ready"
            lazy.error = describe_failure(err, f"s3://{lazy.bucket}/{lazy.key}", self.endpoint)
            if not isinstance(err, Exception):
                raise
        finally:
            if lazy.state != "ready":
                lazy.state = "failed"
                lazy.error = lazy.error or f"fetching s3://{lazy.bucket}/{lazy.key} was interrupted"
            with self._lock:
                self.fetches.append(
                    {
                        "channel": lazy.channel,
                        "key": lazy.key,
                        "bytes": got,
                        "reason": reason,
                        "start": round(start - self.t0, 4),
                        "seconds": round(time.perf_counter() - start, 4),
                        "error": lazy.error,
                    }
                )
            lazy.done.set()

    def errors(self) -> list[str]:
        """Why each failed fetch failed, in order (the job's failure reason names them)."""
        with self._lock:
            return [f["error"] for f in self.fetches if f["error"]]

    def _read_ahead(self, lazy: _Lazy) -> None:
        following = lazy.next
        for _ in range(self.read_ahead):
            nxt = self.files.get(following) if following else None
            if nxt is None:
                return
            if nxt.state == "placeholder":
                self._ahead.submit(self.ensure, nxt.path, "read-ahead")
            following = nxt.next

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self.tcp.shutdown()
        self.tcp.server_close()
        self._ahead.shutdown(wait=True, cancel_futures=True)

    def stats(self) -> dict[str, dict]:
        out: dict[str, dict] = {}
        for f in self.fetches:
            s = out.setdefault(
                f["channel"], {"objects": 0, "bytes": 0, "read_ahead_bytes": 0, "fetch_seconds": 0.0, "errors": []}
            )
            s["objects"] += 1
            s["bytes"] += f["bytes"]
            s["read_ahead_bytes"] += f["bytes"] if f["reason"] == "read-ahead" else 0
            s["fetch_seconds"] += f["seconds"]
            if f["error"]:
                s["errors"].append(f["error"])
        return out
