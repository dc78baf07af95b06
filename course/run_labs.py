"""Run every lab headless with papermill, each in a fresh kernel, and write a summary.

    python -m course.run_labs --labs 01 03 --full        # some labs, full size (default: all, smoke size)
    python -m course.run_labs --target ml.p4d.24xlarge   # dry-run the real jobs (prints the requests)

On idle cores two labs run at once, each on half of them; a lab whose lessons need more (its ``cores``) runs alone
first. Results land in ``--out``. Exits non-zero if a lab fails or does not show a lesson its prose claims; a lesson
too few cores cannot show is listed.
"""

from __future__ import annotations

import argparse
import ast
import difflib
import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path

from course import lab_parameters, lessons
from course.kernels import ENGINE, kernel_config, quiet_shutdown_kernel_manager, register_engine, trace_dead_kernel
from course.lab import LABS_DIR, LabError, declared_parameters, numbered_notebooks, with_solutions
from course.manifest import listing
from helpers.aws.dry_run import REQUESTS_ENV
from helpers.errors import TargetError
from helpers.job_spec import RUNS_DIR
from helpers.local import monitor
from helpers.report import FIGURES_ENV, RESULT
from helpers.targets import SAGEMAKER, local_cpu_count, resolve
from sagemaker_standin import MemoryWatch
from sagemaker_standin.children import DIE_WITH_PARENT
from sagemaker_standin.offline_account import OFFLINE_ENV_FLAG

REPO_RECORD = LABS_DIR.parent / "docs" / "studio-twin.json"  # the Studio twin's last run, committed: each lab's time


@dataclass
class LabRun:
    lab: str
    status: str  # ok | failed | interrupted
    seconds: float
    notebook: str
    figures: dict = field(default_factory=dict)
    error: str = ""
    requests: list[str] = field(default_factory=list)  # JSON files of the SageMaker requests its dry runs built
    cores: list[int] = field(default_factory=list)  # the cores it ran on, where it ran in a stream of its own
    lessons_not_held: list[str] = field(default_factory=list)  # its prose's claims this run did not bear out
    lessons_not_shown: list[str] = field(default_factory=list)  # lessons these cores were too few for (the lab said so)

    @property
    def passed(self) -> bool:
        """It ran, and taught what its prose says it shows."""
        return self.status == "ok" and not self.lessons_not_held

    def line(self) -> str:
        """Its line in the runner's output: status, time, result, and what went wrong, if anything."""
        error = f"\n    {self.error}" if self.error else ""
        untaught = "".join(f"\n    LESSON NOT HELD: {claim}" for claim in self.lessons_not_held)
        unshown = "".join(f"\n    not shown on these cores: {claim}" for claim in self.lessons_not_shown)
        return f"{self.status} ({self.seconds:.0f} s)  {headline(self)}{error}{untaught}{unshown}"


def run_lab(
    notebook: Path,
    out_dir: Path,
    parameters: dict,
    verbose: bool = False,
    solutions: bool = False,
    hold_fd: int | None = None,
) -> LabRun:
    """One lab in a fresh kernel (holding ``hold_fd``, the run folder's lock, while it lives); a kernel that dies
    is traced to the cell that was running, and the executed notebook keeps what ran until then."""
    import papermill as pm

    out_dir = Path(out_dir).resolve()  # the kernel runs in the notebook's folder: hand it absolute paths only
    out_dir.mkdir(parents=True, exist_ok=True)
    wanted = declared_parameters(notebook)
    given = {k: v for k, v in parameters.items() if k in wanted}
    if "runs_dir" in wanted:  # what the lab writes for itself (stores, jobs) goes under --out too, never elsewhere
        given.setdefault("runs_dir", str(out_dir / f"{notebook.stem}.runs"))
    executed = out_dir / notebook.name
    figures_file = out_dir / f"{notebook.stem}.figures.json"
    figures_file.unlink(missing_ok=True)
    os.environ[FIGURES_ENV] = str(figures_file)  # the kernel inherits it; helpers.report.record() writes there
    requests_dir = out_dir / f"{notebook.stem}.requests"
    for old in requests_dir.glob("*.json"):
        old.unlink()
    os.environ[REQUESTS_ENV] = str(requests_dir)  # helpers.aws.dry_run saves each dry run's request there
    start, memory, engine = time.perf_counter(), MemoryWatch(), register_engine()
    # a Unix socket path holds ~100 bytes at most: a deep clone would fail every lab, so the sockets live in the
    # run's temporary folder (run_folder_temp), a short path
    sockets = tempfile.TemporaryDirectory(prefix="kernel-")
    source = notebook
    if solutions:  # the answered copy runs in the lab's folder like the lab itself
        source = Path(sockets.name) / notebook.name
        source.write_text(json.dumps(with_solutions(notebook), indent=1, ensure_ascii=False), encoding="utf-8")
    try:
        pm.execute_notebook(
            str(source),
            str(executed),
            parameters=given,
            kernel_name="python3",
            cwd=str(notebook.parent),
            progress_bar=False,
            log_output=verbose,
            request_save_on_cell_execute=False,
            config=kernel_config(sockets.name),
            kernel_manager_class=quiet_shutdown_kernel_manager(hold_fd),
            engine_name=ENGINE,
        )
        status, error = "ok", ""
    except pm.PapermillExecutionError as e:
        status = "failed"
        error = f"cell {e.cell_index} (execution count {e.exec_count}): {e.ename}: {e.evalue}"
    except Exception as e:  # noqa: BLE001 - a kernel that dies or will not start is a failed lab, not a crash
        status, error = "failed", f"{type(e).__name__}: {e}"
        if engine.notebook is not None:  # it died mid-run: which cell, and the notebook of what ran until then
            oom_where = memory.limit()[1] if memory.killed_a_process() else ""
            error = trace_dead_kernel(engine.notebook, executed, e, oom_where)
    finally:
        sockets.cleanup()
        os.environ.pop(FIGURES_ENV, None)
        os.environ.pop(REQUESTS_ENV, None)
    figures = json.loads(figures_file.read_text()) if figures_file.is_file() else {}
    requests = [str(p) for p in sorted(requests_dir.glob("*.json"))]
    measured = not real_jobs(str(parameters.get("target", "local")))  # a dry run of real jobs measures nothing
    untaught = lessons.wrong(notebook.stem, figures) if status == "ok" and measured else []
    unshown = lessons.not_shown(notebook.stem, figures) if status == "ok" and measured else []
    seconds = round(time.perf_counter() - start, 1)
    return LabRun(
        notebook.stem,
        status,
        seconds,
        str(executed),
        figures,
        error,
        requests,
        lessons_not_held=untaught,
        lessons_not_shown=unshown,
    )


def write_summary(runs: list[LabRun], out_dir: Path, parameters: dict) -> None:
    (out_dir / "summary.json").write_text(
        json.dumps({"parameters": parameters, "labs": [asdict(r) for r in runs]}, indent=1, ensure_ascii=False)
    )
    lines = ["| lab | status | seconds | result | key figures |", "|---|---|---|---|---|"]
    for r in runs:
        figs = ", ".join(f"{k}={v}" for k, v in r.figures.items() if k != RESULT) or ""
        status = f"{r.status}{': ' + r.error if r.error else ''}"
        status += "".join(f"; lesson not held: {claim}" for claim in r.lessons_not_held)
        status += "".join(f"; not shown on these cores: {claim}" for claim in r.lessons_not_shown)
        lines.append(f"| {r.lab} | {status} | {r.seconds} | {r.figures.get(RESULT, '')} | {figs} |")
    (out_dir / "summary.md").write_text("\n".join(lines) + "\n", encoding="utf-8")


def headline(run: LabRun) -> str:
    """What a lab's line in the runner's output says: its result sentence (``report.says(..., headline=True)``), or
    its first figures where it has none (a dry run, a lab that failed before it)."""
    if RESULT in run.figures:
        return str(run.figures[RESULT])
    return "  ".join(f"{k}={v}" for k, v in list(run.figures.items())[:4])


def parse_value(text: str):
    """``-p epochs 3`` gives 3, ``-p smoke false`` gives False, anything else stays a string."""
    lowered = text.lower()
    if lowered in ("true", "false"):
        return lowered == "true"
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text


def real_jobs(target: str) -> bool:
    """Whether ``target`` names SageMaker instances (an ``ml.*`` type, or ``sagemaker``: each lab's real_target): a
    dry run of real jobs unless the labs are told to launch, and nothing measured on this machine."""
    target = target.strip()
    return target.lower().startswith("ml.") or target == SAGEMAKER


def refuse_bad(ap: argparse.ArgumentParser, a: argparse.Namespace, labs: list[Path], target: str) -> None:
    """Fail before any kernel starts: an unknown target, a parameter no chosen lab declares (a misspelt one would
    be dropped silently), an --out that is a file."""

    try:
        if target.strip() == SAGEMAKER:  # each lab's own real_target
            lacking = [nb.stem for nb in labs if "real_target" not in declared_parameters(nb)]
            if lacking:
                raise TargetError(f"--target sagemaker: {', '.join(lacking)} declare no real_target")
        else:
            resolve(target)
    except TargetError as e:
        ap.error(str(e))
    declared = set().union(*(declared_parameters(nb) for nb in labs))
    for name, _ in a.parameter:
        if name not in declared:
            close = difflib.get_close_matches(name, declared, 1)
            ap.error(
                f"-p {name}: no chosen lab has that parameter"
                + (f"; did you mean {close[0]!r}?" if close else f"; they have {', '.join(sorted(declared))}")
            )
    given = {name: parse_value(value) for name, value in a.parameter}
    wrong = {said for nb in labs for said in lab_parameters.problems(given, nb)}  # as each set-up cell checks them
    if wrong:
        ap.error("bad -p value: " + "; ".join(sorted(wrong)) + ". papermill's spellings: -p smoke true, -p epochs 3")
    if a.out.exists() and not a.out.is_dir():
        ap.error(f"--out {a.out} is a file: give a directory for the executed notebooks")
    if a.streams is not None and a.streams < 1:
        ap.error(f"--streams {a.streams}: give 1 (one lab at a time) or more")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m course.run_labs", description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--target", default="local", help="local, local_cpu, local_gpu, sagemaker (each lab's real_target) or ml.*"
    )
    size = ap.add_mutually_exclusive_group()
    size.add_argument("--smoke", dest="smoke", action="store_true", default=True, help="tiny sizes (default)")
    size.add_argument("--full", dest="smoke", action="store_false", help="the labs' full sizes")
    ap.add_argument("--labs", nargs="*", help="lab numbers or names (default: all)")
    ap.add_argument("--out", type=Path, default=RUNS_DIR / "labs")
    ap.add_argument("--labs-dir", type=Path, default=LABS_DIR, help=argparse.SUPPRESS)
    ap.add_argument("-p", "--parameter", nargs=2, action="append", default=[], metavar=("NAME", "VALUE"))
    ap.add_argument("--verbose", action="store_true", help="stream every cell's output")
    ap.add_argument("--solutions", action="store_true", help="fill in the exercises' reference answers")
    ap.add_argument(
        "--streams",
        type=int,
        help="labs run this many at a time, each on its share of the cores (default: 2 on the local CPU target of a "
        "machine with 2 cores or more, else 1)",
    )
    ap.add_argument("--stream-record", type=Path, help=argparse.SUPPRESS)  # a stream's own run: its result goes there
    ap.add_argument("--hold-fd", type=int, help=argparse.SUPPRESS)  # a stream's: the folder's lock, for its kernel
    a = ap.parse_args(argv)

    parameters = {"target": a.target, "smoke": a.smoke, **{k: parse_value(v) for k, v in a.parameter}}
    try:
        return _run(ap, a, parameters)
    except LabError as e:
        raise SystemExit(f"error: {e}") from None


def _run(ap: argparse.ArgumentParser, a: argparse.Namespace, parameters: dict) -> int:
    labs = numbered_notebooks(a.labs_dir, only=a.labs)
    target = str(parameters["target"])  # --target, or a "-p target ..." given after it
    refuse_bad(ap, a, labs, target)
    if real_jobs(target) and not parameters.get("launch") and OFFLINE_ENV_FLAG not in os.environ:
        # a dry run of every lab: placeholders for account, role and bucket, nothing sent (launch=True lifts it)
        os.environ[OFFLINE_ENV_FLAG] = "1"
        try:
            return run_all(a, labs, parameters)
        finally:
            os.environ.pop(OFFLINE_ENV_FLAG, None)
    return run_all(a, labs, parameters)


def run_all(a: argparse.Namespace, labs: list[Path], parameters: dict) -> int:
    try:
        a.out.mkdir(parents=True, exist_ok=True)
        (a.out / ".run_labs.lock").touch()
    except OSError as e:  # a read-only checkout (runs/ is inside it), a full disk, another user's folder
        raise SystemExit(
            f"error: cannot write the executed notebooks to {a.out} ({e.strerror}): give a folder you can write, "
            f"e.g. --out ~/lab-runs (make: LAB_ARGS='--out ~/lab-runs')"
        ) from None
    if a.stream_record:  # one lab of a parent's streams: it holds the folder's lock with the parent (an inherited
        # descriptor of the same open file, ``--hold-fd``, which its kernel holds too) and the parent writes the summary
        run = run_lab(labs[0], a.out, parameters, a.verbose, solutions=a.solutions, hold_fd=a.hold_fd)
        run.cores = sorted(os.sched_getaffinity(0))
        a.stream_record.write_text(json.dumps(asdict(run), ensure_ascii=False))
        return 0 if run.passed else 1
    with open(a.out / ".run_labs.lock", "w") as lock:
        try:  # one run per folder: two would interleave their request files and overwrite each other's summary
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise SystemExit(
                f"error: another run of course.run_labs is writing to {a.out}; wait for it to finish, or give "
                f"this one a folder of its own (--out)."
            ) from None
        with run_folder_temp(a.out):
            streams = a.streams or default_streams(str(parameters["target"]), len(labs))
            if streams > 1 and len(labs) > 1:
                return _run_streams(a, labs, parameters, streams, lock.fileno())
            return _run_each(a, labs, parameters, lock.fileno())


@contextmanager
def run_folder_temp(out: Path) -> Iterator[Path]:
    """The run's own temporary folder, TMPDIR for everything it starts (kernels and their sockets and connection
    files, stores' and jobs' temporary files): a short path named after ``--out``, so the next run into the folder
    removes what a killed one left there, and removed at the end."""
    name = hashlib.sha256(str(out.resolve()).encode()).hexdigest()[:8]
    folder = Path(tempfile.gettempdir()) / f"lab-run-{name}"
    shutil.rmtree(folder, ignore_errors=True)  # a killed run's
    (folder / "jupyter").mkdir(parents=True, exist_ok=True)
    saved = {k: os.environ.get(k) for k in ("TMPDIR", "JUPYTER_RUNTIME_DIR")}
    os.environ.update(TMPDIR=str(folder), JUPYTER_RUNTIME_DIR=str(folder / "jupyter"))
    tempfile.tempdir = None  # tempfile caches the folder it chose
    try:
        yield folder
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        tempfile.tempdir = None
        shutil.rmtree(folder, ignore_errors=True)


def default_streams(target: str, labs: int) -> int:
    """Two labs at a time on the local CPU target when two or more cores are free; one otherwise (a GPU is not
    shared, a dry run is quick). Beside other work, one lab at a time gets every core that work leaves: two pinned
    labs sharing their cores with it measured their comparisons against the neighbour, not each other (README)."""
    cores = local_cpu_count()
    if labs < 2 or cores < 2 or real_jobs(target) or not hasattr(os, "sched_setaffinity"):  # macOS cannot pin
        return 1
    try:
        if resolve(target).gpus:
            return 1
    except TargetError:
        return 1
    free = monitor.free_cores()
    if free < cores - 0.5:
        print(f"other work keeps this machine busy ({free:.1f} of {cores} cores free): one lab at a time", flush=True)
        return 1
    return 2


def longest_first(labs: list[Path], out: Path) -> list[Path]:
    """The labs, the longest by their last recorded run first: this folder's last summary, else the Studio twin's
    committed record (one lab per core); a lab with no record counts as the longest."""
    seconds: dict[str, float] = {}
    for record in (REPO_RECORD, out / "summary.json"):  # the folder's own last run wins
        if record.is_file():
            try:
                seconds.update({r["lab"]: float(r["seconds"]) for r in json.loads(record.read_text())["labs"]})
            except (ValueError, KeyError, TypeError):
                pass  # a summary cut short, or of another shape: the order only balances the streams
    longest = max(seconds.values(), default=1.0) + 1
    return sorted(labs, key=lambda nb: -seconds.get(nb.stem, longest))


def _stream_command(a: argparse.Namespace, notebook: Path, record: Path, lock_fd: int) -> list[str]:
    """The command that runs one lab as a stream of this run: the same options, that lab only."""
    command = [sys.executable, "-m", "course.run_labs", "--labs-dir", str(a.labs_dir), "--labs", notebook.stem]
    command += ["--target", a.target, "--smoke" if a.smoke else "--full", "--out", str(a.out)]
    declared = declared_parameters(notebook)  # the parent checked every -p against all its labs
    command += [arg for name, value in a.parameter if name in declared for arg in ("-p", name, value)]
    command += ["--solutions"] * a.solutions + ["--verbose"] * a.verbose
    return [*command, "--streams", "1", "--stream-record", str(record), "--hold-fd", str(lock_fd)]


def needed_cores(notebook: Path) -> int:
    """The cores a lab's lessons need (its ``cores`` in ``course.manifest``; 1 for a notebook it does not register)."""
    one = lessons.BY_STEM.get(notebook.stem)
    return one.cores if one else 1


def _run_streams(a: argparse.Namespace, labs: list[Path], parameters: dict, streams: int, lock_fd: int) -> int:
    """Every lab in a process of its own, each pinned to its cores and holding the folder's lock (``lock_fd``) with
    this process: first, one at a time on every core, the labs whose lessons need more cores than a stream's share;
    then the others ``streams`` at a time, each stream on its share."""
    cores = sorted(os.sched_getaffinity(0))
    streams = min(streams, len(cores), len(labs))
    shares = [cores[k::streams] for k in range(streams)]
    for old in ("summary.json", "summary.md"):
        (a.out / old).unlink(missing_ok=True)
    order = longest_first(labs, a.out)
    wide = [nb for nb in order if needed_cores(nb) > min(map(len, shares))]  # shares differ by one on odd counts
    alone = (
        f"{listing(nb.stem for nb in wide)} alone on cores {_cores(cores)} (the cores their lessons need), then "
        if wide
        else ""
    )
    print(
        f"running {len(labs)} lab(s) headless, {alone}{streams} at a time (cores {' | '.join(map(_cores, shares))}): "
        f"{json.dumps(parameters)} -> {a.out}",
        flush=True,
    )
    runs: dict[str, LabRun] = {}
    lock = threading.Lock()
    queue = [nb for nb in order if nb not in wide]
    start = time.perf_counter()

    def stream(share: list[int]) -> None:
        while True:
            with lock:
                if not queue:
                    return
                notebook = queue.pop(0)
            run = _one_stream(a, notebook, share, lock_fd)
            with lock:
                runs[notebook.stem] = run
                print(f"[{len(runs)}/{len(labs)}] {notebook.stem} on core {_cores(share)}: {run.line()}", flush=True)
                write_summary([runs[nb.stem] for nb in labs if nb.stem in runs], a.out, parameters)

    workers = [threading.Thread(target=stream, args=(share,), daemon=True) for share in shares]
    try:
        for notebook in wide:  # one at a time, every core: nothing else of this run beside it
            runs[notebook.stem] = _one_stream(a, notebook, cores, lock_fd)
            print(
                f"[{len(runs)}/{len(labs)}] {notebook.stem} on cores {_cores(cores)}: {runs[notebook.stem].line()}",
                flush=True,
            )
            write_summary([runs[nb.stem] for nb in labs if nb.stem in runs], a.out, parameters)
        for w in workers:
            w.start()
        for w in workers:
            while w.is_alive():
                w.join(0.5)  # a join with a timeout, so that Ctrl-C reaches this thread
    except KeyboardInterrupt:  # the children had the same SIGINT: wait for their records, then say where it stopped
        for w in workers:
            if w.ident is not None:  # started: the wide labs' phase was over
                w.join(60)
        done = [runs[nb.stem] for nb in labs if nb.stem in runs]
        stopped = [
            LabRun(nb.stem, "interrupted", 0.0, "", error="interrupted (Ctrl-C): its files are partial")
            for nb in labs
            if nb.stem not in runs
        ]
        write_summary(done + stopped, a.out, parameters)
        raise
    ordered = [runs[nb.stem] for nb in labs]
    lab_time, wall = sum(r.seconds for r in ordered), time.perf_counter() - start
    return _finish(ordered, a.out, parameters, f": {lab_time:.0f} s of lab time in {wall:.0f} s, {streams} at a time")


def _one_stream(a: argparse.Namespace, notebook: Path, share: list[int], lock_fd: int) -> LabRun:
    """One lab in a child process on ``share``'s cores (everything it starts inherits them); its result, or a failed
    run that says why the child gave none. The child dies with this process (a parent-death signal, tied to this
    thread, which waits for it) and holds the folder's lock too (the same open file), so a run into the folder is
    refused while any stream lives; its record is in the folder, read and removed here."""
    record, log = a.out / f".{notebook.stem}.stream.json", a.out / f"{notebook.stem}.log"
    record.unlink(missing_ok=True)
    start = time.perf_counter()

    def in_child() -> None:
        os.sched_setaffinity(0, share)
        if DIE_WITH_PARENT:
            DIE_WITH_PARENT()

    with open(log, "w", encoding="utf-8") as sink:
        child = subprocess.Popen(
            _stream_command(a, notebook, record, lock_fd),
            stdout=sink,
            stderr=subprocess.STDOUT,
            preexec_fn=in_child,
            pass_fds=(lock_fd,),
        )
        child.wait()  # a Ctrl-C reaches the child too (one process group): it writes its record and ends
    if record.is_file():
        run = LabRun(**json.loads(record.read_text()))
        record.unlink()
        return run
    tail = " | ".join(log.read_text(errors="replace").strip().splitlines()[-3:])
    seconds = round(time.perf_counter() - start, 1)
    return LabRun(notebook.stem, "failed", seconds, "", error=f"its runner exited {child.returncode}: {tail}")


def _cores(share: list[int]) -> str:
    return ",".join(map(str, share))


def _run_each(a: argparse.Namespace, labs: list[Path], parameters: dict, lock_fd: int | None = None) -> int:
    for old in ("summary.json", "summary.md"):  # this run's summary, or none: never an earlier run's
        (a.out / old).unlink(missing_ok=True)
    print(f"running {len(labs)} lab(s) headless: {json.dumps(parameters)} -> {a.out}", flush=True)
    runs: list[LabRun] = []
    for i, nb in enumerate(labs, 1):
        print(f"[{i}/{len(labs)}] {nb.stem} ...", end=" ", flush=True)
        try:
            run = run_lab(nb, a.out, parameters, a.verbose, solutions=a.solutions, hold_fd=lock_fd)
        except KeyboardInterrupt:  # the summary says where the run stopped, and nothing after it
            stopped = LabRun(nb.stem, "interrupted", 0.0, "", error="interrupted (Ctrl-C): its files are partial")
            write_summary([*runs, stopped], a.out, parameters)
            raise
        runs.append(run)
        print(run.line(), flush=True)
        write_summary(runs, a.out, parameters)
    return _finish(runs, a.out, parameters, f" in {sum(r.seconds for r in runs):.0f} s")


def _finish(runs: list[LabRun], out: Path, parameters: dict, how: str) -> int:
    """The run's summary and last lines: how many labs passed (ran, and taught their lessons), and what each of the
    others did instead; the exit status."""
    write_summary(runs, out, parameters)
    failed = [r for r in runs if not r.passed]
    print(f"{len(runs) - len(failed)}/{len(runs)} labs passed{how}; summary: {out / 'summary.md'}")
    for r in runs:
        for claim in r.lessons_not_shown:  # the lab said so itself: a machine too small for it, not a failure
            print(f"note: {r.lab} could not show on these cores: {claim}")
    for r in failed:
        why = r.error or "it ran, but its run did not show: " + "; ".join(r.lessons_not_held)
        print(f"FAILED {r.lab}: {why}\n    executed notebook: {r.notebook}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
