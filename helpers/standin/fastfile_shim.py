"""FastFile's read-through inside a local job: a file's bytes are fetched from the object store when it is first opened.

The local runner copies this file into the job's run folder as ``sitecustomize.py`` and puts that folder first on
``PYTHONPATH``, so every Python process of the job (torchrun, each rank, data-loader workers) loads it before the
training script runs. The script is not changed and does not know: it lists the channel directory (every object is
there at its real size from the start) and opens plain files. Opening one that still holds no bytes blocks until
the runner's FastFile server has fetched it from the store; the open then proceeds on the real file. A fetch that
failed (the store died, the object vanished, it arrived short) fails every open of that file with ``EIO``: a reader
never sees the placeholder's zeros.

Two hooks, standard library only: an audit hook on ``open`` (``open()``, ``io.open``, ``os.open``), and
``tokenizers.Tokenizer.from_file``, which reads from Rust without passing Python's ``open``. Other native readers
(a memory-mapped Arrow file, say) are not covered: on SageMaker, FastFile is a real file system and covers them all.
"""

from __future__ import annotations

import errno
import os
import sys

SERVER_ENV = "WORKSHOP_FASTFILE"  # host:port of the runner's FastFile server
DIRS_ENV = "WORKSHOP_FASTFILE_DIRS"  # the FastFile channel directories of this host, os.pathsep-separated


class ReadThrough:
    """Asks the runner's server for a file's bytes the first time this process opens it."""

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
        self._busy.on = True  # the socket calls below raise audit events of their own
        try:
            reply = self._ask(path)
        finally:
            self._busy.on = False
        if reply == "OK":
            self.ready.add(path)
            return
        # an input/output error, as a read on SageMaker's FastFile mount fails when S3 does: never the placeholder
        raise OSError(errno.EIO, f"FastFile: {reply.removeprefix('ERR ')}", path)

    def _ask(self, path: str) -> str:
        import socket

        try:
            with socket.create_connection(self.address) as conn:  # blocks as long as the fetch takes, as a read would
                conn.sendall(path.encode("utf-8", "surrogateescape") + b"\n")
                with conn.makefile("r", encoding="utf-8", errors="replace") as answer:
                    return answer.readline().strip() or "ERR the FastFile server closed the connection"
        except OSError as err:
            return (
                f"ERR the runner's FastFile server at {self.address[0]}:{self.address[1]} is gone ({err}); "
                f"the job outlived the runner that presented its channel"
            )

    def audit(self, event: str, args: tuple) -> None:
        if event == "open" and args and args[0] is not None:
            self.ensure(args[0])


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
    _patch_tokenizers(read_through)
    return read_through


if __name__ == "sitecustomize":
    install()
    _chain()
