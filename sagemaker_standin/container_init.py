"""The first process of a local job's host, doing what a SageMaker training container's first process does.

    python container_init.py [--forward-sigterm] -- COMMAND [ARG...]

It starts COMMAND as its subreaper (Linux), so nothing outlives the host: when COMMAND exits, what it left is killed
and the script exits as COMMAND did; SIGHUP or standard input closing (the notebook died) kills everything, as a lost
instance does. SIGTERM changes nothing, as in an SDK v3 job, unless ``--forward-sigterm`` hands it to every process.
Standard library only.
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
import threading
import time

PR_SET_CHILD_SUBREAPER = 36


def become_subreaper() -> bool:
    """Orphaned descendants are re-parented here instead of to the machine's init (Linux 3.4+)."""
    try:
        return ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def descendants(root: int) -> list[int]:
    """Live (not zombie) descendants of ``root``, read from /proc; empty where there is no /proc.

    Zombies are walked through, not returned: a dying process may still name as its parent one that has already
    become a zombie, and it must not drop out of the tree for that.
    """
    children: dict[int, list[int]] = {}
    zombies: set[int] = set()
    try:
        entries = os.listdir("/proc")
    except OSError:
        return []
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                stat = f.read().decode(errors="replace")
        except OSError:
            continue
        fields = stat[stat.rfind(")") + 2 :].split()  # the command name may contain spaces and parentheses
        children.setdefault(int(fields[1]), []).append(int(entry))
        if fields[0] == "Z":
            zombies.add(int(entry))
    found, todo = [], list(children.get(root, []))
    while todo:
        pid = todo.pop()
        if pid not in zombies:
            found.append(pid)
        todo.extend(children.get(pid, []))
    return found


def kill_all(sig: int = signal.SIGKILL, patience_s: float = 60.0) -> None:
    """Send ``sig`` to every descendant; with SIGKILL, until none is left, not even one still dying.

    A killed process lives on until the kernel has torn it down, seconds on a busy machine for one holding a large
    heap, and it is reparented here (we are the subreaper) only when its own parent has gone. So SIGKILL ends when
    no descendant is seen and every child of ours has been reaped (a process forking meanwhile is caught next round),
    or after ``patience_s``.
    """
    deadline = time.monotonic() + patience_s
    while True:
        pids = descendants(os.getpid())
        for pid in pids:
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
        if sig != signal.SIGKILL:
            return
        none_left = _reap()
        if (none_left and not pids) or time.monotonic() > deadline:
            return
        time.sleep(0.01)


def _reap() -> bool:
    """Collect every child that has ended; True when no child is left at all."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return True
        if pid == 0:
            return False


def _end_everything(*_) -> None:
    kill_all(signal.SIGKILL)
    _reap()
    sys.stdout.flush()
    os.kill(os.getpid(), signal.SIGKILL)  # the host ends as a reclaimed instance does: killed


def _watch_launcher() -> None:
    """The launcher holds our standard input open; when it closes, nobody is left to stop the job."""
    try:
        while sys.stdin.buffer.read(4096):
            pass
    except (OSError, ValueError):
        pass
    os.kill(os.getpid(), signal.SIGHUP)


def main(argv: list[str]) -> int:
    forward = "--forward-sigterm" in argv[: argv.index("--")] if "--" in argv else False
    command = argv[argv.index("--") + 1 :] if "--" in argv else []
    if not command:
        print(__doc__, file=sys.stderr)
        return 2
    become_subreaper()
    # handlers, not SIG_IGN: an ignored signal would stay ignored in every process started from here
    signal.signal(signal.SIGHUP, _end_everything)
    # StopTrainingJob's SIGTERM reaches a container's first process only: in an SDK v3 job a bash with no handler for
    # it, and the kernel drops such a signal to a PID namespace's first process. Forwarded, as tini -g would: best case
    signal.signal(signal.SIGTERM, (lambda *_: kill_all(signal.SIGTERM)) if forward else (lambda *_: None))
    signal.signal(signal.SIGINT, lambda *_: None)  # a notebook's interrupt goes to the launcher, which decides
    status = 0
    child = subprocess.Popen(command, stdin=subprocess.DEVNULL)
    threading.Thread(target=_watch_launcher, daemon=True).start()
    while True:  # reap everything: our command, and orphans re-parented to us
        try:
            pid, status = os.wait()
        except ChildProcessError:
            break
        if pid == child.pid:
            break
    kill_all(signal.SIGKILL)  # the container ends with its command: nothing it started outlives it
    _reap()
    sys.stdout.flush()
    if os.WIFSIGNALED(status):  # end the same way, so the launcher reads -N as it would for the command itself
        sig = os.WTERMSIG(status)
        if sig != signal.SIGKILL:  # SIGKILL (the OOM killer's) has no handler to reset: signal.signal refuses it
            signal.signal(sig, signal.SIG_DFL)
        os.kill(os.getpid(), sig)
    return os.waitstatus_to_exitcode(status)


if __name__ == "__main__":
    try:
        code = main(sys.argv[1:])
    except BaseException:  # noqa: BLE001 - said, then left as below: a traceback at shutdown would abort (SIGABRT)
        import traceback

        traceback.print_exc()
        code = 1
    sys.stdout.flush()
    os._exit(code)  # not sys.exit: the thread blocked reading stdin would stall the interpreter's shutdown
