"""Folders that runs share or own, safe when two runs (two notebooks, two ``make``) go at once.

- :func:`build_once`: a shared folder built aside and renamed into place whole, so no run reads it half-built;
- :func:`own_folder`: a new folder for one run, locked while its process lives; :func:`release` removes it, and
  :func:`refuse_released` keeps the runner, the store and the drill from writing there again. The next
  :func:`own_folder` in its place removes one whose process ended, never one whose process still runs.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from helpers.errors import WorkshopError

LOCK = ".owner.lock"  # in every folder own_folder makes: locked (flock) by its process until release or exit
_HELD: dict[Path, int] = {}  # own folder -> the descriptor holding its lock, open for as long as the process runs
_RELEASED: set[Path] = set()  # own folders this process removed: nothing of this process writes under them again


class FolderError(WorkshopError, RuntimeError):
    """A folder this process does not own was to be removed."""


def own_folder(parent: str | os.PathLike, prefix: str = "run-") -> Path:
    """A new, empty folder under ``parent`` (``prefix``, then a time stamp and a unique tail) for this process
    alone; abandoned folders with the same prefix beside it are removed first."""
    parent = Path(parent).resolve()
    parent.mkdir(parents=True, exist_ok=True)
    for old in parent.glob(f"{prefix}*"):
        _remove_if_abandoned(old)
    # made and locked under a name no one removes, then renamed: a cleaner never sees it unlocked
    new = Path(tempfile.mkdtemp(prefix=".new-", dir=parent))
    fd = os.open(new / LOCK, os.O_CREAT | os.O_RDWR, 0o644)  # not inherited by child processes (PEP 446)
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    folder = parent / f"{prefix}{time.strftime('%Y%m%d-%H%M%S')}-{new.name.removeprefix('.new-')}"
    new.rename(folder)
    _HELD[folder] = fd
    return folder


def release(folder: str | os.PathLike) -> None:
    """Remove a folder :func:`own_folder` made in this process, and give up its lock."""
    folder = Path(folder).resolve()
    if folder not in _HELD:
        raise FolderError(
            f"{folder} was not made by helpers.folders.own_folder in this process: another run may be using it, "
            "so it stays. Remove it yourself once no run uses it."
        )
    shutil.rmtree(folder, ignore_errors=True)
    os.close(_HELD.pop(folder))  # only now: a cleaner that locks it finds nothing left to remove
    _RELEASED.add(folder)


def refuse_released(path: str | os.PathLike) -> None:
    """Refuse a run's writing under a folder this process's clean-up removed: a cell run again after a lab's
    clean-up cell would make it anew, without the lock that lets the next run remove it, and it would stay."""
    path = Path(path).resolve()
    for gone in _RELEASED:
        if path == gone or gone in path.parents:
            raise FolderError(
                f"{gone} was removed by the lab's clean-up cell, so nothing more is written there: run the lab's "
                f"set-up cell again (it makes a new folder of its own), then this cell."
            )


def _remove_if_abandoned(folder: Path) -> None:
    try:
        fd = os.open(folder / LOCK, os.O_RDWR)
    except OSError:
        return  # not an own folder (or already removed)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)  # its process is alive
        return
    try:
        shutil.rmtree(folder, ignore_errors=True)
    finally:
        os.close(fd)


def build_once(
    dest: str | os.PathLike, build: Callable[[Path], object], check: Callable[[Path], object] | None = None
) -> Path:
    """``dest``, built by ``build(path)`` unless it exists (and, with ``check``, passes it: a copy ``check`` refuses
    with a :class:`WorkshopError`, made by an older version or damaged, is built again): ``build`` writes a folder at
    ``path`` (beside ``dest``, not there yet), which is then renamed to ``dest`` in one step. When another process
    has put its copy in place meanwhile, that copy is kept and this one dropped."""
    dest = Path(dest)
    stale = False
    if dest.is_dir():
        try:
            if check is not None:
                check(dest)
            return dest
        except WorkshopError:
            stale = True
    work = own_folder(dest.parent, prefix=f".{dest.name}.building-")  # a killed build's leftovers go next time
    try:
        build(work / dest.name)
        if stale:  # the refused copy goes with this build's folder when it is released
            with contextlib.suppress(FileNotFoundError):
                os.rename(dest, work / "refused")
        try:
            os.rename(work / dest.name, dest)  # atomic; refused when a non-empty dest is already there
        except OSError as err:
            if err.errno not in (errno.EEXIST, errno.ENOTEMPTY) or not dest.is_dir():
                raise
    finally:
        release(work)
    return dest
