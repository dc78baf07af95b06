"""Lab 08's drills, watched from outside as a practitioner watches a failing job; the faults themselves are the
training script's (``labs/src/faults.py``).

- :func:`hang_drill`: a rank stops; the stall report, ``py-spy dump`` and the group's timeout, each timed from the
  last log line, and every process ended whatever happens;
- :func:`step_times`: a straggler's per-rank step times, before and after it slowed;
- :func:`check_resume`, :func:`resume_from`, :func:`loss_gap`: a DCP checkpoint verified against the job that would
  resume it, copied in as SageMaker restores one, and the resumed curve compared step by step.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import sysconfig
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import psutil

from helpers import hyperparameters
from helpers.errors import JobCheckError
from helpers.job_spec import Job, parse_metric_line
from helpers.local.containers import LocalJob
from helpers.local.drill_verdict import DrillFailed
from helpers.local.runner import LocalRunner
from helpers.local.stall_report import stall_report, where_processes
from helpers.results import JobResult
from helpers.targets import Target, given

COLLECTIVE = "average_gradients"  # where train_elastic.py's ranks wait for each other at every step
OWN_FILES = ("train_elastic.py", "faults.py", "container.py", "ranks.py")  # the training code's own frames
META = "meta.json"  # train_elastic.py's checkpoint settings (labs/src/train_elastic.py META)
FINGERPRINT = ("global_batch", "micro_batch", "steps", "lr", "buckets", "dim", "hidden", "seed", "subset")


class ResumeRefused(JobCheckError):
    """A checkpoint that the job would not resume into the same training: refused before launch, saying why."""


# ---------------------------------------------------------------------------------------------------- py-spy
def find_py_spy() -> str | None:
    """py-spy's binary: beside this Python, in its scripts folder, in ~/.local/bin (``make studio``), or on PATH."""
    names = [Path(sys.executable).parent / "py-spy", Path(sysconfig.get_path("scripts")) / "py-spy"]
    names += [Path.home() / ".local" / "bin" / "py-spy"]
    found = next((str(p) for p in names if p.is_file() and os.access(p, os.X_OK)), None)
    return found or shutil.which("py-spy")


def py_spy_dump(pid: int, timeout_s: float = 30) -> tuple[bool, str]:
    """``py-spy dump`` of a process: (True, its stacks) or (False, why not). ``--nonblocking`` reads the stacks
    without pausing the process, so a stopped one is read too. It reads another process's memory, which needs ptrace
    permission: containers without ``CAP_SYS_PTRACE`` and some Studio spaces refuse it."""
    exe = find_py_spy()
    if exe is None:
        return False, "py-spy is not installed here (pip install py-spy; `make studio` adds it in Studio)"
    try:
        done = subprocess.run(
            [exe, "dump", "--pid", str(pid), "--nonblocking"], capture_output=True, text=True, timeout=timeout_s
        )
    except subprocess.TimeoutExpired:
        return False, f"py-spy dump of pid {pid} did not answer within {timeout_s:.0f} s"
    text = re.sub(
        r"\x1b\[[0-9;]*m", "", done.stdout + done.stderr
    ).strip()  # its colours, where it thinks a terminal reads
    if done.returncode != 0:
        denied = re.search(r"permission|not permitted|ptrace|EPERM", text, re.I)
        why = (
            "it may not read another process's memory (no ptrace permission: a container without CAP_SYS_PTRACE, "
            "or kernel.yama.ptrace_scope above 0, as in some Studio spaces); the faulthandler stacks are the fallback"
            if denied
            else "see its message"
        )
        return (
            False,
            f"py-spy could not attach to pid {pid}: {text.splitlines()[-1] if text else done.returncode}: {why}",
        )
    return True, text


def innermost_own_frame(stack: str) -> str:
    """The innermost frame of the training code in a stack (py-spy's ``fn (file.py:N)`` or faulthandler's
    ``File ".../file.py", line N in fn``), as ``fn (file.py:N)``; "" if none."""
    for line in stack.splitlines():
        m = re.search(r"(\w+) \(([\w./-]+):(\d+)\)", line)
        if m and Path(m[2]).name in OWN_FILES:
            return f"{m[1]} ({Path(m[2]).name}:{m[3]})"
        m = re.search(r'File "([^"]+)", line (\d+) in (\w+)', line)
        if m and Path(m[1]).name in OWN_FILES:
            return f"{m[3]} ({Path(m[1]).name}:{m[2]})"
    return ""


# ---------------------------------------------------------------------------------------------------- the hang
@dataclass
class RankView:
    """One rank of a hung job as the tools saw it."""

    rank: int
    host: str
    pid: int
    state: str  # psutil's: sleeping, stopped...
    cpu_s: float
    frame: str = ""  # its innermost frame in the training code, from py-spy (or faulthandler)
    stack: str = ""  # py-spy's dump, or the faulthandler stacks its host printed

    @property
    def in_collective(self) -> bool:
        return self.state != psutil.STATUS_STOPPED and self.frame.startswith(COLLECTIVE + " ")


@dataclass
class HangDrill:
    """What the drill saw: the last lines before the silence, each diagnosis and when it came, the ranks."""

    job: str
    fault: dict
    last_step: int
    steps: int
    before_silence: list[str]  # the log's last lines before it went silent
    events: dict[str, float] = field(default_factory=dict)  # diagnosis -> seconds after the last log line
    report: str = ""  # the stall report
    faulthandler: list[str] = field(default_factory=list)  # the stacks the live ranks printed into the log
    py_spy: dict[int, str] = field(default_factory=dict)  # rank -> its dump, or why there is none
    py_spy_ok: bool = False
    timeout_error: str = ""
    ranks: list[RankView] = field(default_factory=list)
    status: str = ""
    failure_reason: str = ""  # the job's FailureReason: the first failed host's
    processes_left: int = -1

    def stuck(self) -> list[RankView]:
        """The ranks not where the others are: stopped, or waiting outside the step's all-reduce."""
        return [r for r in self.ranks if not r.in_collective]

    def timeline(self) -> list[dict]:
        return [{"diagnosis": k, "seconds after the last log line": round(v, 2)} for k, v in self.events.items()]

    def rank_rows(self) -> list[dict]:
        return [
            {
                "rank": r.rank,
                "host": r.host,
                "state": r.state,
                "CPU s": round(r.cpu_s, 1),
                "where (training code)": r.frame or "?",
            }
            for r in self.ranks
        ]


def hang_drill(
    job: Job,
    target: Target,
    silence_s: float = 1.5,
    wait_for_timeout: bool = True,
    use_py_spy: bool = True,
    limit_s: float = 180.0,
) -> HangDrill:
    """Run ``job`` (``train_elastic.py`` with a ``stop`` or ``skip_collective`` fault), wait until its log has been
    silent for ``silence_s`` after training started, then diagnose it: the stall report, the faulthandler stacks,
    ``py-spy dump`` of each rank and (``wait_for_timeout``) the process group's timeout. Every process the job
    started is ended before this returns, on success, failure or interrupt."""
    lines: list[tuple[float, str, str]] = []
    runner = LocalRunner(echo=False, check=False, on_line=lambda h, l: lines.append((time.monotonic(), h, l)))
    live = runner.start(job, given(target))
    box: dict[str, JobResult] = {}
    waiter = threading.Thread(target=lambda: box.setdefault("result", live.wait()), daemon=True)
    waiter.start()
    hp = job.hyperparameters
    try:
        last = _wait_for_silence(live, lines, waiter, silence_s, limit_s, box)
        trained = [m for _, _, l in lines if l.startswith("[train]") and (m := parse_metric_line(l))]
        d = HangDrill(
            job.name,
            {k: hp.get(k) for k in ("fault", "fault_rank", "fault_step")},
            int(trained[-1]["step"]) if trained else 0,
            int(hp.get("steps", 24)),
            [f"[{h}] {l}" for _, h, l in lines[-6:]],
        )
        _diagnose(d, live, lines, last, use_py_spy)
        if wait_for_timeout:
            _wait_for_timeout(d, live, lines, last, limit_s)
    finally:
        live.kill()  # every host, whatever state its processes are in (SIGKILL ends a stopped one too)
        waiter.join(30)
    result = box.get("result")
    d.status = result.status if result else "unknown"
    d.failure_reason = result.failure_reason if result else ""
    d.processes_left = len(live.processes())
    _verify(d, wait_for_timeout)
    return d


def _wait_for_silence(
    live: LocalJob, lines: list, waiter: threading.Thread, silence_s: float, limit_s: float, box: dict
) -> float:
    """The time of the last line, once the log has been silent for ``silence_s`` after the first training step."""
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        if not waiter.is_alive():
            tail = "\n".join(l for _, _, l in lines[-15:])
            ended = box.get("result")  # a job that failed on its own (a process limit, memory) says why first
            why = (
                f"it failed: {ended.failure_reason}" if ended and ended.failure_reason else "the fault did not hang it"
            )
            raise DrillFailed(f"the job ended before it went silent: {why}. Its log ends:\n{tail}")
        if any(l.startswith("[train]") for _, _, l in lines) and time.monotonic() - lines[-1][0] >= silence_s:
            return lines[-1][0]
        time.sleep(0.02)
    raise DrillFailed(f"the job did not go silent within {limit_s:.0f} s")


def _diagnose(d: HangDrill, live: LocalJob, lines: list, last: float, use_py_spy: bool) -> None:
    """The stall report (with the faulthandler stacks it asks for), then py-spy, each timed from ``last``."""
    seen = where_processes(live.procs)
    asked = time.monotonic()
    d.report = stall_report(live.procs, asked - last)
    d.events["stall report (states, CPU time)"] = time.monotonic() - last
    quiet_until = time.monotonic() + 3.0  # the stacks come within milliseconds; the wait ends once they stop
    while time.monotonic() < quiet_until and not (
        lines and lines[-1][0] > asked and time.monotonic() - lines[-1][0] > 0.3
    ):
        time.sleep(0.02)
    stacks = [(t, h, l) for t, h, l in lines if t > asked]
    d.faulthandler = [f"[{h}] {l}" for _, h, l in stacks]
    if stacks:
        d.events["faulthandler stacks in the log"] = stacks[-1][0] - last
    for p in seen:
        if p["role"].startswith("rank "):
            host_stack = "\n".join(l for _, h, l in stacks if h == p["host"])
            d.ranks.append(
                RankView(
                    int(p["role"].split()[1]),
                    p["host"],
                    p["pid"],
                    p["state"],
                    p["cpu_s"],
                    innermost_own_frame(host_stack),
                    host_stack,
                )
            )
    d.ranks.sort(key=lambda r: r.rank)
    if use_py_spy:
        oks = []
        for r in d.ranks:
            ok, text = py_spy_dump(r.pid)
            oks.append(ok)
            d.py_spy[r.rank] = text
            if ok:
                r.stack, r.frame = text, innermost_own_frame(text) or r.frame
        d.py_spy_ok = bool(oks) and all(oks)
        d.events["py-spy dump of every rank" if d.py_spy_ok else "py-spy (could not attach)"] = time.monotonic() - last


def _wait_for_timeout(d: HangDrill, live: LocalJob, lines: list, last: float, limit_s: float) -> None:
    """Until a rank's process group times out and its host ends: the error line and when it came."""
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        error = next((l for _, _, l in lines if re.search(r"timed out|timeout", l, re.I) and "[runner]" not in l), "")
        if error and not d.timeout_error:
            d.timeout_error = error.strip()
            d.events["process group timeout: the error"] = time.monotonic() - last
        ended = [h for h, p in live.procs.items() if p.poll() is not None]
        if ended and d.timeout_error:
            d.events["a host's processes ended (the job fails)"] = time.monotonic() - last
            return
        time.sleep(0.05)
    raise DrillFailed(f"no process group timeout within {limit_s:.0f} s: is --dist_timeout_s set?")


def _verify(d: HangDrill, waited_for_timeout: bool) -> None:
    """The drill did what it says, or it fails loudly: the fault hit mid-run, the tools saw it, nothing is left."""
    problems = []
    if not 0 < d.last_step < d.steps:
        problems.append(f"the job logged step {d.last_step} of {d.steps}: the fault did not hit mid-run")
    if d.fault.get("fault") == "stop" and not any(r.state == psutil.STATUS_STOPPED for r in d.ranks):
        problems.append("no rank was found stopped")
    if not d.stuck():
        problems.append("every rank was in the step's all-reduce: the tools did not find the stuck one")
    if waited_for_timeout and not d.timeout_error:
        problems.append("the process group's timeout error was not seen")
    if d.processes_left:
        problems.append(f"{d.processes_left} process(es) of the job outlived it")
    if problems:
        raise DrillFailed("the hang drill did not do what it claims: " + "; ".join(problems))


# ---------------------------------------------------------------------------------------------------- stragglers
def step_times(result: JobResult, slow_from: int) -> list[dict]:
    """Each rank's mean compute, wait (in the all-reduce) and step time in ms, before step ``slow_from`` (the first
    step skipped: start-up) and from it on, from the job's ``[timing]`` lines."""
    rows = []
    timing = [h for h in result.history if h["kind"] == "timing"]
    for rank in sorted({int(h["rank"]) for h in timing}):
        for phase, keep in (("before", lambda s: 1 < s < slow_from), ("after", lambda s: s >= slow_from)):
            mine = [h for h in timing if int(h["rank"]) == rank and keep(int(h["step"]))]
            if mine:
                rows.append(
                    {
                        "rank": rank,
                        "steps": phase,
                        "compute ms": statistics.mean(h["compute_ms"] for h in mine),
                        "wait ms": statistics.mean(h["wait_ms"] for h in mine),
                        "step ms": statistics.mean(h["step_ms"] for h in mine),
                    }
                )
    return rows


# ---------------------------------------------------------------------------------------------------- resuming
def _newest(checkpoint_dir: Path) -> Path | None:
    found = [p for p in Path(checkpoint_dir).glob("step-*") if (p / META).is_file()]
    return max(found, key=lambda p: int(p.name.split("-")[1])) if found else None


def check_resume(checkpoint_dir: Path | str, job: Job) -> dict:
    """The newest checkpoint's settings, if ``job`` would resume it into the same training on its world size;
    else :class:`ResumeRefused`, before anything is launched, naming what differs or why the world size cannot
    keep the global batch."""
    path = _newest(Path(checkpoint_dir))
    if path is None:
        raise ResumeRefused(f"no complete checkpoint (a step-N folder with its {META}) in {checkpoint_dir}")
    saved, wrong = checkpoint_damage(path)
    if saved is None or wrong:
        raise ResumeRefused(
            f"{path.name} of {path.parent} is damaged, and would resume into garbage: {wrong}. {_earlier(path)}"
        )
    files = saved.pop("files")
    known = hyperparameters.options(Path(job.source_dir) / job.entry_point) or {}
    now = {k: job.hyperparameters.get(k, known[k].default if k in known else None) for k in FINGERPRINT}
    changed = [
        f"{k}: the checkpoint's {saved.get(k)!r}, this job's {now[k]!r}"
        for k in FINGERPRINT
        if saved.get(k) is not None and str(saved.get(k)) != str(now[k]) and float_or(saved.get(k)) != float_or(now[k])
    ]
    if changed:
        raise ResumeRefused(
            f"{path.name} of {path.parent} was written by another run; resuming it would train something else: "
            + "; ".join(changed)
            + ". Resume with the checkpoint's settings, or start from a fresh checkpoint directory."
        )
    world = job.instance_count * (job.processes_per_host or 1)
    batch, micro = int(saved["global_batch"]), int(saved["micro_batch"])
    if batch % (world * micro):
        fits = [w for w in range(1, batch // micro + 1) if batch % (w * micro) == 0]
        raise ResumeRefused(
            f"{path.name} trained a global batch of {batch} rows in micro-batches of {micro}; {world} rank(s) cannot "
            f"split it ({batch} is not a multiple of {world} x {micro}), so the resumed job would train another "
            f"batch. World sizes that keep it: {', '.join(map(str, fits))}."
        )
    now = {"path": str(path), "files_verified": len(files), "world_size_now": world}
    return {**saved, **now, "accumulation_now": batch // (world * micro)}


def checkpoint_damage(path: Path) -> tuple[dict | None, str]:
    """A checkpoint's ``meta.json``, and what is wrong with it or its files ("" if nothing): meta.json unreadable or
    recording no files, a file it records (a DCP shard, ``.metadata``) missing, of another size or SHA-256. The same
    check as train_elastic.py's resume, made before anything is launched."""
    try:
        saved = json.loads((path / META).read_text(encoding="utf-8"))
        recorded = {name: (int(r["bytes"]), str(r["sha256"])) for name, r in saved["files"].items()}
    except (OSError, ValueError) as err:  # json.JSONDecodeError is a ValueError: a meta.json cut short
        return None, f"its {META} is unreadable ({type(err).__name__}: {err}): cut short or damaged"
    except (KeyError, TypeError, AttributeError):
        return None, f"its {META} records no file sizes and checksums (an older or foreign checkpoint)"
    for name, (length, digest) in sorted(recorded.items()):
        file = path / name
        if not file.is_file():
            return saved, f"{name} is missing"
        if file.stat().st_size != length:
            return saved, f"{name} is {file.stat().st_size} bytes, {length} when written: cut short or damaged"
        if _sha256(file) != digest:
            return saved, f"{name} does not match its SHA-256 ({length} bytes, changed since written)"
    return saved, ""


def _sha256(file: Path) -> str:
    digest = hashlib.sha256()
    with open(file, "rb") as f:
        while block := f.read(1 << 20):
            digest.update(block)
    return digest.hexdigest()


def _earlier(path: Path) -> str:
    """Which earlier checkpoint beside ``path`` verifies, said as what to do."""
    step = int(path.name.split("-")[1])
    earlier = sorted(
        (p for p in path.parent.glob("step-*") if p.name.split("-")[1].isdigit() and int(p.name.split("-")[1]) < step),
        key=lambda p: int(p.name.split("-")[1]),
        reverse=True,
    )
    good = next((p for p in earlier if not checkpoint_damage(p)[1]), None)
    if good:
        return f"{good.name} beside it verifies: resume from it (failures.resume_from({str(good)!r}, ...))"
    return "No earlier checkpoint beside it verifies: start from a fresh checkpoint directory."


def float_or(value):
    try:
        return float(value)
    except (TypeError, ValueError):
        return value


def resume_from(checkpoint: Path | str, into: Path | str) -> Path:
    """Copy one checkpoint (a ``step-N`` folder) into a fresh checkpoint directory for the resuming job, as SageMaker
    copies the checkpoint prefix into ``/opt/ml/checkpoints`` before the script starts."""
    src, dest = Path(checkpoint), Path(into)
    if dest.exists():
        raise JobCheckError(f"{dest} exists already: resume into a fresh directory")
    shutil.copytree(src, dest / src.name)
    return dest


def losses(result: JobResult) -> dict[int, tuple[float, int]]:
    """step -> (loss, batch id) from the job's metrics.json (full precision)."""
    history = json.loads((result.output_dir / "metrics.json").read_text(encoding="utf-8"))["history"]
    return {h["step"]: (h["train_loss"], h["batch"]) for h in history}


def loss_gap(reference: JobResult, resumed: JobResult, from_step: int) -> dict:
    """The resumed curve against the uninterrupted one, step by step after ``from_step``: the largest loss gap, and
    whether every step trained the same rows (the data position). Refuses a resume that did not start there."""
    ref, res = losses(reference), losses(resumed)
    if not res or min(res) != from_step + 1:
        raise DrillFailed(f"the resumed job started at step {min(res) if res else None}, not {from_step + 1}")
    steps = sorted(set(ref) & set(res))
    if not steps or steps[-1] != max(ref):
        raise DrillFailed("the resumed job did not reach the uninterrupted run's last step")
    gaps = [abs(ref[s][0] - res[s][0]) for s in steps]
    return {
        "steps compared": len(steps),
        "max loss gap": max(gaps),
        "same rows every step": all(ref[s][1] == res[s][1] for s in steps),
        "first step": steps[0],
        "last step": steps[-1],
    }


def mystery_job(channels: dict, hyperparameters: dict) -> Job:
    """Exercise 08.1's job: two hosts of one rank, one rank going wrong at some step (read its stall report to say
    which, and how). Its fault is here, out of the learner's sight; the lab shows it after the exercise."""
    fault = {"fault": "skip_collective", "fault_rank": 1, "fault_step": 6}
    return Job(
        "lab08-mystery",
        {**hyperparameters, **fault},
        channels,
        entry_point="train_elastic.py",
        instance_count=2,
        processes_per_host=1,
    )
