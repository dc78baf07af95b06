"""Where each process of a silent local job is: its role, state, CPU time and the kernel call it waits in, and its
Python stacks (a live rank prints them on SIGUSR1). The job's clock reports it after ``stall_s`` of silence; lab 08's
hang drill reads it too."""

from __future__ import annotations

import os
import signal
import subprocess


def where_processes(hosts: dict[str, subprocess.Popen]) -> list[dict]:
    """Every process of a live job, as the stall report reads it: its host, PID, role (``rank N``, ``torchrun``...),
    state (``sleeping``, ``stopped``...), CPU seconds and the kernel call it sleeps in (``wchan``; "" on a CPU)."""
    import psutil

    found = []
    for host, proc in hosts.items():
        try:
            processes = psutil.Process(proc.pid).children(recursive=True)
        except psutil.NoSuchProcess:
            continue
        for p in processes:
            try:
                with p.oneshot():
                    state, cpu, role = p.status(), sum(p.cpu_times()[:2]), role_of(p)
            except (psutil.Error, OSError):
                continue
            where = _read(f"/proc/{p.pid}/wchan")  # the kernel call it sleeps in ("0": on a CPU)
            found.append(
                {
                    "host": host,
                    "pid": p.pid,
                    "role": role,
                    "state": state,
                    "cpu_s": cpu,
                    "wchan": "" if where == "0" else where,
                }
            )
    return found


def stall_report(hosts: dict[str, subprocess.Popen], silent_s: float) -> str:
    """Where each process of a silent job is: what it is (a rank, torchrun...), its state, its CPU time and the kernel
    call it sleeps in; a live Python rank is asked for its stacks, which it prints into the log (``container.run``
    registers faulthandler on SIGUSR1). A stopped process cannot answer: the report says it is stopped."""
    import psutil

    lines = [f"[runner] no log line for {silent_s:.0f} s; where each process of the job is:"]
    for p in where_processes(hosts):
        if p["state"] == psutil.STATUS_STOPPED:
            stack = "stopped (SIGSTOP or a debugger): it cannot run, or answer, until SIGCONT"
        elif p["role"] != "torchrun" and _catches(p["pid"], signal.SIGUSR1):
            try:
                os.kill(p["pid"], signal.SIGUSR1)
            except OSError:
                continue
            stack = "its Python stacks follow in the log"
        else:
            stack = ""
        detail = f"{p['state']}, {p['cpu_s']:.1f} s CPU" + (f", waiting in {p['wchan']}" if p["wchan"] else "")
        detail += f"; {stack}" if stack else ""
        lines.append(f"[runner]   {p['host']} pid {p['pid']} {p['role']}: {detail}")
    return "\n".join(lines)


def role_of(p) -> str:
    """What a process of a job is: ``torchrun``, ``rank N`` (its RANK variable) or its command line."""
    cmd = " ".join(p.cmdline())
    if "torch.distributed.run" in cmd or "torchrun" in cmd:
        return "torchrun"
    try:
        rank = p.environ().get("RANK")
    except Exception:  # noqa: BLE001 - psutil.AccessDenied and friends: say less
        rank = None
    return f"rank {rank}" if rank is not None else (cmd[:60] or p.name())


def _read(path: str) -> str:
    try:
        with open(path) as f:
            return f.read().strip()
    except OSError:
        return ""


def _catches(pid: int, sig: int) -> bool:
    """Whether process ``pid`` has a handler for ``sig`` (its ``SigCgt`` mask): a signal it does not catch would
    end it."""
    for line in _read(f"/proc/{pid}/status").splitlines():
        if line.startswith("SigCgt:"):
            return bool(int(line.split()[1], 16) >> (sig - 1) & 1)
    return False
