"""FastFile's read-through inside a local job: a file's bytes are streamed from the object store as they are read.

The local runner installs this file as the job's ``sitecustomize.py``, first on ``PYTHONPATH``, so every Python
process of the job loads it; the training script is unchanged. In a FastFile channel, ``open()`` returns a reader
whose every read first asks the runner's server for its range; a failed range fails the read with ``EIO``, never
showing the placeholder's zeros. ``os.open`` and ``Tokenizer.from_file`` fetch the whole file first; other native
readers (memory-mapped Arrow) are not covered.
"""

from __future__ import annotations

import errno
import io
import os
import sys

SERVER_ENV = "WORKSHOP_FASTFILE"  # host:port of the runner's FastFile server
DIRS_ENV = "WORKSHOP_FASTFILE_DIRS"  # the FastFile channel directories of this host, os.pathsep-separated
READ_BUFFER = 1 << 20  # a buffered reader asks the server once per MiB, not once per line


class ReadThrough:
    """Asks the runner's server for a file's byte ranges as this process reads them (or for all of it, once)."""

    def __init__(self, server: str, dirs: list[str]):
        host, _, port = server.rpartition(":")
        self.address = (host, int(port))
        self.roots = tuple(os.path.join(os.path.abspath(d), "") for d in dirs if d)
        self.ready: set[str] = set()
        import threading

        self._busy = threading.local()

    def covers(self, path: str) -> bool:
        return path.startswith(self.roots)

    def ensure(self, path) -> None:
        """Block until ``path`` (if it lies in a FastFile channel) holds its bytes; raise if it cannot."""
        try:
            path = os.fspath(path)
        except TypeError:
            return  # a file descriptor
        if isinstance(path, bytes):
            path = os.fsdecode(path)
        path = os.path.abspath(path)
        if path in self.ready or not self.covers(path) or getattr(self._busy, "on", False):
            return
        self._checked(self.quietly(self._ask, path), path)

    def read_range(self, path: str, start: int, end: int) -> int | None:
        """Block until bytes ``[start, end)`` of ``path`` are here; how far from ``start`` the bytes are here, or None
        when the whole file is (read it locally)."""
        return self._checked(self.quietly(self._ask, f"READ {start} {end} {path}"), path)

    def opened(self, path: str) -> None:
        """A new reader of ``path``: the server keeps no bytes from earlier readers for it (Mountpoint's default,
        without a data cache), so its reads fetch again."""
        self.ready.discard(path)
        self._checked(self.quietly(self._ask, f"OPEN {path}"), path)

    def _checked(self, reply: str, path: str) -> int | None:
        if reply == "OK FULL":
            self.ready.add(path)
            return None
        if reply.startswith("OK"):
            return int(reply.split()[1])
        # an input/output error, as a read on SageMaker's FastFile mount fails when S3 does: never the placeholder
        raise OSError(errno.EIO, f"FastFile: {reply.removeprefix('ERR ')}", path)

    def quietly(self, call, *args):
        """``call(*args)`` with this thread's audit events ignored (the socket and file calls raise their own)."""
        self._busy.on = True
        try:
            return call(*args)
        finally:
            self._busy.on = False

    def streamable(self, file, mode: str, opener) -> str | None:
        """The absolute path if ``open(file, mode)`` reads a FastFile file (each open reads it anew), else None."""
        if opener is not None or not isinstance(mode, str) or set(mode) - {"r", "b", "t"}:
            return None
        try:
            path = os.fspath(file)
        except TypeError:
            return None  # a file descriptor
        path = os.path.abspath(os.fsdecode(path))
        return path if self.covers(path) and os.path.isfile(path) else None  # every open reads anew: no data cache

    def _ask(self, request: str) -> str:
        """One request on this thread's connection (a forked process opens its own); blocks as a read would."""
        try:
            conn, answer = self._connection()
            conn.sendall(request.encode("utf-8", "surrogateescape") + b"\n")
            reply = answer.readline().strip()
            if not reply:
                self._busy.conn = None
                return "ERR the FastFile server closed the connection"
            return reply
        except OSError as err:
            self._busy.conn = None
            return (
                f"ERR the runner's FastFile server at {self.address[0]}:{self.address[1]} is gone ({err}); "
                f"the job outlived the runner that presented its channel"
            )

    def _connection(self):
        held = getattr(self._busy, "conn", None)
        if held is None or held[0] != os.getpid():
            import socket

            conn = socket.create_connection(self.address)
            held = (os.getpid(), conn, conn.makefile("r", encoding="utf-8", errors="replace"))
            self._busy.conn = held
        return held[1], held[2]

    def audit(self, event: str, args: tuple) -> None:
        if event == "open" and args and args[0] is not None:
            self.ensure(args[0])


class StreamedFile(io.RawIOBase):
    """A FastFile file opened for reading: each read waits for its range from the server, then reads the file."""

    def __init__(self, path: str, read_through: ReadThrough):
        super().__init__()
        self.name, self.mode, self._through = path, "rb", read_through
        self._fd = read_through.quietly(os.open, path, os.O_RDONLY)
        read_through.opened(path)  # this reader fetches its bytes anew
        self._size, self._pos = os.fstat(self._fd).st_size, 0
        self._whole, self._here = False, (0, 0)  # the whole file, or a range of it, known to be here

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def fileno(self) -> int:
        return self._fd

    def tell(self) -> int:
        return self._pos

    def seek(self, offset: int, whence: int = os.SEEK_SET) -> int:
        base = {os.SEEK_SET: 0, os.SEEK_CUR: self._pos, os.SEEK_END: self._size}[whence]
        self._pos = max(0, base + offset)
        return self._pos

    def readinto(self, buffer) -> int:
        n = min(len(buffer), self._size - self._pos)
        if n <= 0:
            return 0
        if not self._whole and not self._here[0] <= self._pos < self._pos + n <= self._here[1]:
            here = self._through.read_range(self.name, self._pos, self._pos + n)
            self._whole, self._here = here is None, (self._pos, here or 0)
        data = os.pread(self._fd, n, self._pos)
        buffer[: len(data)] = data
        self._pos += len(data)
        return len(data)

    def readall(self) -> bytes:
        """The rest of the file in one request (``read()`` with no size)."""
        buffer = bytearray(max(0, self._size - self._pos))
        return bytes(buffer[: self.readinto(buffer)])

    def close(self) -> None:
        if not self.closed:
            os.close(self._fd)
        super().close()


def _patch_open(read_through: ReadThrough) -> None:
    """``open``/``io.open`` of a FastFile file for reading return a :class:`StreamedFile` (buffered, or as text)."""
    import builtins

    real_open = io.open

    def open(file, mode="r", buffering=-1, encoding=None, errors=None, newline=None, closefd=True, opener=None):
        path = read_through.streamable(file, mode, opener)
        if path is None:
            return real_open(file, mode, buffering, encoding, errors, newline, closefd, opener)
        raw = StreamedFile(path, read_through)
        if buffering == 0 and "b" in mode:
            return raw
        buffered = io.BufferedReader(raw, buffer_size=buffering if buffering > 1 else READ_BUFFER)
        if "b" in mode:
            return buffered
        return io.TextIOWrapper(buffered, encoding=encoding, errors=errors, newline=newline)

    builtins.open = io.open = open


def _patch_tokenizers(read_through: ReadThrough) -> None:
    """Wrap ``Tokenizer.from_file`` once ``tokenizers`` is imported (its Rust loader skips Python's ``open``)."""
    import importlib.abc
    import importlib.machinery

    class Finder(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name != "tokenizers":
                return None
            spec = importlib.machinery.PathFinder.find_spec(name, path)
            if spec is None or spec.loader is None:
                return spec
            load = spec.loader.exec_module

            def exec_module(module):
                load(module)
                original = module.Tokenizer.from_file

                def from_file(path, *args, **kwargs):
                    read_through.ensure(path)
                    return original(path, *args, **kwargs)

                module.Tokenizer.from_file = staticmethod(from_file)

            # this import's own loader, patched on the instance: mypy forbids assigning methods
            spec.loader.exec_module = exec_module  # type: ignore[method-assign]
            return spec

    sys.meta_path.insert(0, Finder())


def _chain() -> None:
    """Run the next ``sitecustomize`` on the path too (only the first one found is imported by ``site``)."""
    import importlib.machinery
    import importlib.util

    here = os.path.dirname(os.path.abspath(__file__))
    rest = [p for p in sys.path if os.path.abspath(p or os.curdir) != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", rest)
    if spec and spec.loader and spec.origin and os.path.dirname(os.path.abspath(spec.origin)) != here:
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)


def install() -> ReadThrough | None:
    server, dirs = os.environ.get(SERVER_ENV), os.environ.get(DIRS_ENV, "")
    if not server or not dirs:
        return None
    read_through = ReadThrough(server, dirs.split(os.pathsep))
    sys.addaudithook(read_through.audit)
    _patch_open(read_through)
    _patch_tokenizers(read_through)
    return read_through


if __name__ == "sitecustomize":
    install()
    _chain()
