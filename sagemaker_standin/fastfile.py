"""FastFile mode's server on the local runner: a channel's objects presented at once, streamed as they are read.

:meth:`FastFileServer.present` lays each object out as a sparse placeholder of its real size; a job's read first asks
the server for its byte range (:mod:`sagemaker_standin.streamed_open` waits for it). The server fetches as Mountpoint
for Amazon S3 does (sources: helpers/README.md): ranged GETs of at most ``PART_BYTES``, ``CONNECTIONS`` at once;
read-ahead grows ``PREFETCH_MULTIPLIER`` times while reads stay in order, restarts after a jump, never crosses files;
and, as Mountpoint without its opt-in ``--cache``, a file opened again with ``open()`` is fetched again. Unlike
Mountpoint, whose every open handle has a prefetcher of its own, the read-ahead state is the file's: two readers of
one file at once (no lab has them) would reset each other's.
"""

from __future__ import annotations

import concurrent.futures
import itertools
import os
import socketserver
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from sagemaker_standin.store_client import S3Object, ShortRead, Transfer, describe_failure, s3_client

BLOCK_BYTES = 128 << 10  # the grain the server tracks a file in
STREAM_CHUNK_BYTES = 1 << 20  # a GET's body is written (and its blocks made ready) a MiB at a time
PART_BYTES = 8 << 20  # Mountpoint's default --part-size: the largest ranged GET
FIRST_REQUEST_BYTES = (1 << 20) + BLOCK_BYTES  # Mountpoint's first request of a file (and after a jump)
PREFETCH_MULTIPLIER = 8  # Mountpoint's sequential_prefetch_multiplier
MAX_REQUEST_BYTES = 2 << 30  # Mountpoint's max_request_size
CONNECTIONS = 16  # 10 Gbit/s (Mountpoint's default target) at the S3 profile's 85 MB/s per connection


@dataclass
class _Lazy:
    """One presented object: its blocks' states (absent: never asked for), and how it is being read."""

    path: str
    channel: str
    bucket: str
    key: str
    size: int
    modified: float
    blocks: dict[int, str] = field(default_factory=dict)  # block -> fetching | ready | failed
    fetched_by: dict[int, int] = field(default_factory=dict)  # block -> the GET fetching it (an older one may linger)
    ahead: set[int] = field(default_factory=set)  # blocks fetched before a read asked for them
    window: int = FIRST_REQUEST_BYTES
    next_offset: int = -1  # where the last read ended
    frontier: int = 0  # where the bytes asked for so far end
    error: str = ""

    @property
    def n_blocks(self) -> int:
        return -(-self.size // BLOCK_BYTES)


class FastFileServer:
    """Streams presented objects on demand for the jobs' read-through (loopback TCP, one line per request)."""

    def __init__(self, endpoint: str, connections: int = CONNECTIONS):
        self.endpoint = endpoint
        self.client = s3_client(endpoint, max_pool_connections=connections)
        self.files: dict[str, _Lazy] = {}
        self.fetches: list[dict] = []  # one per ranged GET: its object, range, bytes, read-ahead, timing, error
        self.requests = 0  # reads the job asked the server for
        self.blocked_s = 0.0  # how long the job's reads waited for bytes, all together
        self._changed = threading.Condition()  # guards every _Lazy and the lists above
        self._closed = False
        self._pool = concurrent.futures.ThreadPoolExecutor(connections, thread_name_prefix="fastfile-get")
        self._get_ids = itertools.count()
        self.t0 = time.perf_counter()
        server = self

        class Handler(socketserver.StreamRequestHandler):
            def handle(self):  # one connection per reading thread, one line per request, until it closes
                for raw in self.rfile:
                    line = raw.decode("utf-8", "surrogateescape").rstrip("\n")
                    try:
                        reply = server.answer(line)
                    except Exception as err:  # noqa: BLE001 - the reader gets an error, never a silent "OK"
                        reply = f"ERR the FastFile server failed on {line}: {type(err).__name__}: {err}"
                    self.wfile.write(f"{reply}\n".encode("utf-8", "replace"))
                    self.wfile.flush()

        self.tcp = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Handler)
        self.tcp.daemon_threads = True
        threading.Thread(
            target=self.tcp.serve_forever, args=(0.05,), name="fastfile-server", daemon=True
        ).start()  # close() waits a poll at most

    @property
    def address(self) -> str:
        host, port = self.tcp.server_address[:2]
        assert isinstance(host, str)  # a bound socket's own name for its address; the stubs allow bytes too
        return f"{host}:{port}"

    def present(
        self, channel: str, bucket: str, files: list[tuple[str, S3Object]], dest: Path, scratch: Path
    ) -> Transfer:
        """Every object (``files``: its path under ``dest``, the object) as a placeholder of its real size and time
        stamp: listed at once, no bytes fetched. (``scratch`` is unused: ranges land in place.)"""
        t0 = time.perf_counter()
        dest.mkdir(parents=True, exist_ok=True)
        for relative, o in files:
            path = dest / relative
            path.parent.mkdir(parents=True, exist_ok=True)
            with open(path, "wb") as f:
                f.truncate(o.size)  # sparse: no disk used until the bytes arrive
            os.utime(path, (o.modified, o.modified))
            lazy = _Lazy(str(path.resolve()), channel, bucket, o.key, o.size, o.modified)
            self.files[lazy.path] = lazy
        return Transfer(0, 0, time.perf_counter() - t0)

    def answer(self, line: str) -> str:
        """``READ <start> <end> <path>``: that range; a bare path: the whole file; ``OPEN <path>``: a new reader of
        it. ``OK <offset>`` (every byte from ``start`` to that offset is here: read up to it without asking), ``OK
        FULL`` (the whole file is here: read it locally from now on) or ``ERR <why>``."""
        start = 0
        if line.startswith("OPEN "):
            self.opened(line.removeprefix("OPEN "))
            return "OK 0"
        if line.startswith("READ "):
            _, first, end, path = line.split(" ", 3)
            start, error = int(first), self.ensure(path, int(first), int(end))
        else:
            path, error = line, self.ensure(line)
        if error is not None:
            return f"ERR {error}"
        lazy = self._lookup(path)
        if lazy is None:
            return "OK FULL"
        with self._changed:
            if self._complete(lazy):
                return "OK FULL"
            block = start // BLOCK_BYTES
            while lazy.blocks.get(block) == "ready":
                block += 1
            return f"OK {min(lazy.size, block * BLOCK_BYTES)}"

    def ensure(self, path: str, start: int = 0, end: int | None = None) -> str | None:
        """Make bytes ``[start, end)`` of ``path`` (all of it by default) hold the object's bytes; None when they do
        (or ``path`` is not a presented object), else why not. A failed range is an error for every read of it,
        then and later: a reader never gets the placeholder's zeros."""
        lazy = self._lookup(path)
        if lazy is None:
            return None
        end = lazy.size if end is None else min(end, lazy.size)
        asked = time.perf_counter()
        wanted = range(start // BLOCK_BYTES, -(-end // BLOCK_BYTES)) if end > start else range(0)
        with self._changed:
            self.requests += 1
            ahead_end = self._read_ahead(lazy, start, end) if end - start < lazy.size else end
            self._schedule(lazy, range(wanted.start, -(-ahead_end // BLOCK_BYTES)), set(wanted))
            while any(lazy.blocks[b] == "fetching" for b in wanted):
                self._changed.wait()
            self.blocked_s += time.perf_counter() - asked
            if any(lazy.blocks[b] == "failed" for b in wanted):
                return lazy.error or f"s3://{lazy.bucket}/{lazy.key} could not be fetched"
        return None

    def opened(self, path: str) -> None:
        """A new reader of ``path``: what earlier readers fetched is not kept for it (no data cache), so its reads
        fetch again, read-ahead starting from the first size. Ranges still in flight, and failures, stay."""
        lazy = self._lookup(path)
        if lazy is None:
            return
        with self._changed:
            lazy.blocks = {b: state for b, state in lazy.blocks.items() if state != "ready"}
            lazy.fetched_by = {b: get for b, get in lazy.fetched_by.items() if b in lazy.blocks}
            lazy.ahead &= set(lazy.blocks)
            lazy.window, lazy.next_offset, lazy.frontier = FIRST_REQUEST_BYTES, -1, 0

    def _lookup(self, path: str) -> _Lazy | None:
        return self.files.get(os.path.realpath(path)) or self.files.get(path)

    @staticmethod
    def _complete(lazy: _Lazy) -> bool:
        return len(lazy.blocks) == lazy.n_blocks and all(s == "ready" for s in lazy.blocks.values())

    def _read_ahead(self, lazy: _Lazy, start: int, end: int) -> int:
        """Where this read's request ends: the window grows while the reads follow one another, and starts again
        after a jump."""
        if 0 <= lazy.next_offset <= start <= lazy.frontier:  # onwards, within what was asked for: in order
            lazy.window = min(PREFETCH_MULTIPLIER * lazy.window, MAX_REQUEST_BYTES)
        elif lazy.next_offset >= 0:
            lazy.window = FIRST_REQUEST_BYTES
        lazy.next_offset = end
        request_end = min(lazy.size, max(end, start + lazy.window))
        lazy.frontier = max(lazy.frontier, request_end)
        return request_end

    def _schedule(self, lazy: _Lazy, blocks: range, demanded: set[int]) -> None:
        """Fetch the blocks of ``blocks`` never asked for, as ranged GETs of at most PART_BYTES (lock held); those
        not in ``demanded`` are read ahead."""
        run: list[int] = []
        for b in blocks:
            if b in lazy.blocks:
                continue
            if self._closed:  # the job outlived its runner: nothing more arrives
                lazy.blocks[b], lazy.error = "failed", lazy.error or "the runner's FastFile server has stopped"
                continue
            if run and (b != run[-1] + 1 or b * BLOCK_BYTES % PART_BYTES == 0):  # parts aligned, as Mountpoint's
                self._submit(lazy, run)
                run = []
            lazy.blocks[b] = "fetching"
            if b not in demanded:
                lazy.ahead.add(b)
            run.append(b)
        if run:
            self._submit(lazy, run)

    def _submit(self, lazy: _Lazy, blocks: list[int]) -> None:
        """One GET for ``blocks``, which it alone makes ready or failed (lock held): a GET of an earlier reader, still
        finishing, never settles blocks a new reader asked for again."""
        get = next(self._get_ids)
        for b in blocks:
            lazy.fetched_by[b] = get
        self._pool.submit(self._get, lazy, blocks, get)

    def _get(self, lazy: _Lazy, blocks: list[int], get: int) -> None:
        """One ranged GET, streamed in place: each block is ready once all its bytes arrived, so a read waits only
        for its own; whatever did not arrive is failed, never "ready"."""
        first, last = blocks[0] * BLOCK_BYTES, min(lazy.size, (blocks[-1] + 1) * BLOCK_BYTES)
        began, got, error = time.perf_counter(), 0, ""
        try:
            body = self.client.get_object(Bucket=lazy.bucket, Key=lazy.key, Range=f"bytes={first}-{last - 1}")["Body"]
            fd = os.open(lazy.path, os.O_WRONLY)
            try:
                for chunk in body.iter_chunks(STREAM_CHUNK_BYTES):
                    os.pwrite(fd, chunk, first + got)
                    got += len(chunk)
                    self._arrived(lazy, blocks, first, got, get)
            finally:
                os.close(fd)
            if got != last - first:
                raise ShortRead(f"received {got} of the {last - first} bytes of a range")
            os.utime(lazy.path, (lazy.modified, lazy.modified))
        except BaseException as err:  # anything (even an interrupt) leaves the rest of the range failed
            error = describe_failure(err, f"s3://{lazy.bucket}/{lazy.key}", self.endpoint)
            if not isinstance(err, Exception):
                raise
        finally:
            with self._changed:
                for b in blocks:
                    if lazy.blocks.get(b) == "fetching" and lazy.fetched_by.get(b) == get:
                        lazy.blocks[b] = "failed" if error else "ready"
                lazy.error = lazy.error or error
                self.fetches.append(
                    {
                        "channel": lazy.channel,
                        "key": lazy.key,
                        "range": [first, last],
                        "bytes": got,
                        "read_ahead_bytes": sum(self._block_bytes(lazy, b) for b in blocks if b in lazy.ahead),
                        "start": round(began - self.t0, 4),
                        "seconds": round(time.perf_counter() - began, 4),
                        "error": error,
                    }
                )
                self._changed.notify_all()

    def _arrived(self, lazy: _Lazy, blocks: list[int], first: int, got: int, get: int) -> None:
        """The blocks of GET ``get`` whose bytes are all here (``got`` bytes from offset ``first``) become ready."""
        with self._changed:
            for b in blocks:
                if lazy.fetched_by.get(b) != get or lazy.blocks.get(b) != "fetching":
                    continue
                if (b + 1) * BLOCK_BYTES <= first + got or lazy.size <= first + got:
                    lazy.blocks[b] = "ready"
            self._changed.notify_all()

    def errors(self) -> list[str]:
        """Why each failed fetch failed, in order (the job's failure reason names them)."""
        with self._changed:
            return [f["error"] for f in self.fetches if f["error"]]

    def close(self) -> None:
        if self._closed:
            return
        with self._changed:
            self._closed = True
        self.tcp.shutdown()
        self.tcp.server_close()
        self._pool.shutdown(wait=True, cancel_futures=True)

    def stats(self) -> dict[str, dict]:
        """Per channel: objects and bytes fetched, how many of those bytes were read ahead of the reads, the GETs and
        their seconds, errors."""
        out: dict[str, dict] = {}
        keys: dict[str, set[str]] = {}
        with self._changed:
            for f in self.fetches:
                s = out.setdefault(
                    f["channel"],
                    {"objects": 0, "bytes": 0, "read_ahead_bytes": 0, "gets": 0, "fetch_seconds": 0.0, "errors": []},
                )
                keys.setdefault(f["channel"], set()).add(f["key"])
                s["objects"] = len(keys[f["channel"]])
                s["bytes"] += f["bytes"]
                s["read_ahead_bytes"] += min(f["bytes"], f["read_ahead_bytes"])
                s["gets"] += 1
                s["fetch_seconds"] += f["seconds"]
                if f["error"]:
                    s["errors"].append(f["error"])
        return out

    @staticmethod
    def _block_bytes(lazy: _Lazy, block: int) -> int:
        return min(lazy.size, (block + 1) * BLOCK_BYTES) - block * BLOCK_BYTES
