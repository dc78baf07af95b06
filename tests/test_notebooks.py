"""The labs as committed, and every lab run headless through papermill in smoke size."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import botocore.session
import nbformat
import pytest
from botocore.validate import validate_parameters

from course import kernels, lab, lab_time, lessons, manifest, run_labs
from helpers import report

LABS = [one.notebook for one in manifest.LABS]  # every registered lab (tests/test_registries.py)
CREATE_TRAINING_JOB = (
    botocore.session.get_session().get_service_model("sagemaker").operation_model("CreateTrainingJob").input_shape
)


def test_there_are_labs():
    assert LABS and LABS[0].name == "01_single_gpu.ipynb"


@pytest.mark.parametrize("notebook", LABS, ids=lambda p: p.stem)
def test_committed_without_outputs_and_with_a_portable_kernel(notebook):
    nb = json.loads(notebook.read_text(encoding="utf-8"))
    code = [c for c in nb["cells"] if c["cell_type"] == "code"]
    assert code and not any(c.get("outputs") or c.get("execution_count") for c in code)
    assert nb["metadata"]["kernelspec"]["name"] == "python3"  # a Studio kernel name fails everywhere else
    nbformat.validate(nbformat.reads(notebook.read_text(encoding="utf-8"), as_version=4))


@pytest.mark.parametrize("notebook", LABS, ids=lambda p: p.stem)
def test_lab_declares_target_and_smoke_and_says_time_and_cost(notebook):
    assert {"target", "smoke"} <= lab.declared_parameters(notebook)
    text = notebook.read_text(encoding="utf-8")
    assert "**Time:**" in text and "**Cost:**" in text and "**You will learn**" in text
    first = "".join(json.loads(text)["cells"][0]["source"])  # read before a cell fails for want of the helpers
    assert "make studio" in first and "../README.md" in first  # the set-up in one line, the rest one click away
    readme = (notebook.parents[1] / "README.md").read_text(encoding="utf-8")
    start_here = readme[readme.index("## Start here") :].split("\n## ", 1)[0]
    assert "make studio" in start_here and "No module named 'helpers'" in start_here  # what the link leads to


@pytest.mark.parametrize("notebook", LABS, ids=lambda p: p.stem)
def test_a_lab_writes_in_a_folder_of_its_own_and_removes_no_other(notebook):
    """Two runs of a lab at once (two learners' kernels, two ``make``) must not share a folder or delete each
    other's: a lab that makes folders for itself (jobs, a store) makes one of its own under its ``runs_dir``."""
    code = "\n".join(c.source for c in nbformat.read(notebook, as_version=4).cells if c.cell_type == "code")
    assert "rmtree(" not in code
    assert "runs_dir" in lab.declared_parameters(notebook)
    assert "jobs.write_runs_under(" in code  # every local job, drill and store of the lab goes under it
    if "LocalRunner(" in code or "ObjectStore(" in code:
        assert "folders.own_folder(runs_dir" in code


@pytest.mark.slow
@pytest.mark.labs
@pytest.mark.parametrize("notebook", LABS, ids=lambda p: p.stem)
def test_lab_runs_headless_in_smoke_size_with_every_answer_right_and_in_its_stated_time(notebook, lab_run):
    """The lab's one run of this session (tests/conftest.py ``lab_run``: papermill, smoke size, local target, the
    reference answers applied as ``run_labs --solutions`` does): each check says "right", the lab wrote only under
    its own folder, its stated core and full times agree with the estimate from this very run, the prose's claims
    hold on its figures, and every request its dry runs built is one the SageMaker API accepts. It ran on one core
    while the others were busy (a learner's laptop doing something else), which the test checks too. ``make`` runs
    the labs unanswered; ``make labs-check`` runs this test (``-m labs``), CI's step after ``make test``."""
    executed = lab_run(notebook.stem)
    run = executed.run
    assert run.status == "ok", run.error
    alone = len(os.sched_getaffinity(0)) == 1 and "," not in os.environ.get("WORKSHOP_TEST_CORES", "")
    assert executed.neighbours or alone, "a lab runs beside busy cores (make labs-check)"
    idle = {core: share for core, share in executed.neighbours.items() if share < 0.9}
    assert not idle, f"the lab ran beside cores that were not kept busy: {idle}"
    own = Path(run.notebook).parent / f"{notebook.stem}.runs"
    assert own.is_dir(), f"the lab's jobs, drills and stores are written under its own folder, {own}"
    assert not executed.strays, f"the lab wrote outside its own folder: {executed.strays}"
    assert run.figures, "a lab records its key figures with helpers.report.record()"
    assert report.RESULT in run.figures, "a lab marks its result sentence: report.says(..., headline=True)"
    done = nbformat.read(run.notebook, as_version=4)
    assert any(c.get("outputs") for c in done.cells if c.cell_type == "code")
    exercises = lab.exercise_cells(json.loads(notebook.read_text(encoding="utf-8")))
    outcomes = {k.removeprefix("exercise "): v for k, v in run.figures.items() if k.startswith("exercise ")}
    assert outcomes == dict.fromkeys(exercises, "right"), "every reference answer passes its check"
    t = lab_time.estimate(notebook, Path(run.notebook))
    core, full = t.stated
    assert lab_time.within(core, t.core.minutes), f"core path: stated {core} min, estimated {t.core.minutes:.1f}"
    assert lab_time.within(full, t.full.minutes), f"whole lab: stated {full} min, estimated {t.full.minutes:.1f}"
    unborne = lessons.wrong(notebook.stem, run.figures)
    assert not unborne, f"the prose says {unborne}, its run recorded {run.figures}"
    # on fewer cores than its lessons need a lab says which it cannot show (and shows the figure it would be); given
    # them, it shows every one
    one, here = lessons.BY_STEM[notebook.stem], len(os.sched_getaffinity(0))
    assert bool(run.lessons_not_shown) == (here < one.cores and bool(one.budget_claims)), (here, run.lessons_not_shown)
    assert bool(run.lessons_not_shown) == bool(run.figures.get("not_shown"))
    assert run.lessons_not_held == unborne and run.passed, "the runner checks the lessons as this test does"
    assert run.requests, "every core path shows its job's request on the lab's real target (jobs.on_sagemaker)"
    for path in run.requests:
        saved = json.loads(Path(path).read_text(encoding="utf-8"))
        validate_parameters(saved["request"], CREATE_TRAINING_JOB)  # raises ParamValidationError when invalid
        assert saved["calls"].get("sagemaker.CreateTrainingJob") == 1 and saved["target"].startswith("ml.")


def _notebook(path: Path, cells: list[tuple[str, str]]) -> Path:
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    for kind, src in cells:
        cell = nbformat.v4.new_code_cell(src)
        if kind == "params":
            cell.metadata["tags"] = ["parameters"]
        nb.cells.append(cell)
    nbformat.write(nb, path)
    return path


def test_runner_names_the_failing_cell_and_exits_non_zero(tmp_path, capsys):
    labs = tmp_path / "labs"
    labs.mkdir()
    _notebook(
        labs / "01_fine.ipynb",
        [
            ("params", "target = 'x'\nsmoke = True"),
            ("code", "from helpers import report\nreport.record(seen_target=target)"),
        ],
    )
    _notebook(
        labs / "02_broken.ipynb",
        [
            ("params", "target = 'x'\nsmoke = True"),
            ("code", "x = 1"),
            ("code", "raise ValueError('the data went missing')"),
        ],
    )
    code = run_labs.main(["--labs-dir", str(labs), "--out", str(tmp_path / "out"), "--target", "local_cpu"])
    assert code == 1
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    fine, broken = summary["labs"]
    assert fine["status"] == "ok" and fine["figures"] == {"seen_target": "local_cpu"}  # the parameter was injected
    assert broken["status"] == "failed" and "cell 3" in broken["error"] and "the data went missing" in broken["error"]
    assert "FAILED 02_broken" in capsys.readouterr().err


def test_runner_names_a_lesson_a_lab_ran_but_did_not_show_and_exits_non_zero(tmp_path, monkeypatch, capsys):
    """A lab that runs to its end but whose run does not bear out what its prose says did not teach: ``make`` says
    which lesson, in its line and in the summary, and exits non-zero. A dry run of real jobs is not held to them."""
    labs = tmp_path / "labs"
    labs.mkdir()
    _notebook(
        labs / "01_fine.ipynb",
        [("params", "target = 'x'\nsmoke = True"), ("code", "from helpers import report\nreport.record(margin=1.5)")],
    )
    monkeypatch.setitem(lessons.CLAIMS, "01_fine", {"the margin is at least 2 points": lambda f: f["margin"] >= 2})
    args = ["--labs-dir", str(labs), "--out", str(tmp_path / "out"), "--streams", "1"]
    assert run_labs.main([*args, "--target", "local_cpu"]) == 1
    out, err = capsys.readouterr()
    assert "LESSON NOT HELD: the margin is at least 2 points" in out and "0/1 labs passed" in out
    assert "FAILED 01_fine: it ran, but its run did not show: the margin is at least 2 points" in err
    (run,) = json.loads((tmp_path / "out" / "summary.json").read_text())["labs"]
    assert run["status"] == "ok" and run["lessons_not_held"] == ["the margin is at least 2 points"]
    assert "lesson not held: the margin is at least 2 points" in (tmp_path / "out" / "summary.md").read_text()
    monkeypatch.setitem(lessons.CLAIMS, "01_fine", {"the margin is at least 1 point": lambda f: f["margin"] >= 1})
    assert run_labs.main([*args, "--target", "local_cpu"]) == 0
    monkeypatch.setitem(lessons.CLAIMS, "01_fine", {"never": lambda f: False})
    assert run_labs.main([*args, "--target", "ml.g5.2xlarge"]) == 0  # a dry run measures nothing


def test_runner_gives_a_lab_s_own_folders_a_place_under_its_output_folder(tmp_path):
    labs = tmp_path / "labs"
    labs.mkdir()
    _notebook(
        labs / "01_fine.ipynb",
        [
            ("params", "target = 'x'\nsmoke = True\nruns_dir = ''"),
            ("code", "from helpers import report\nreport.record(runs_dir=runs_dir)"),
        ],
    )
    out = tmp_path / "out"
    assert run_labs.main(["--labs-dir", str(labs), "--out", str(out), "--target", "local_cpu"]) == 0
    assert json.loads((out / "summary.json").read_text())["labs"][0]["figures"] == {
        "runs_dir": str(out.resolve() / "01_fine.runs")
    }
    assert run_labs.main(["--labs-dir", str(labs), "--out", str(out), "-p", "runs_dir", "/elsewhere"]) == 0
    assert json.loads((out / "summary.json").read_text())["labs"][0]["figures"] == {"runs_dir": "/elsewhere"}


def test_runner_accepts_a_relative_output_folder(tmp_path, monkeypatch):
    labs = tmp_path / "labs"
    labs.mkdir()
    _notebook(
        labs / "01_fine.ipynb",
        [
            ("params", "target = 'x'\nsmoke = True"),
            ("code", "from helpers import report\nreport.record(seen_target=target)"),
        ],
    )
    monkeypatch.chdir(tmp_path)  # the kernel runs in labs/, so a relative socket path would point elsewhere
    assert run_labs.main(["--labs-dir", "labs", "--out", "out/relative", "--target", "local_cpu"]) == 0


@pytest.mark.parametrize(
    "args, says",
    [
        (["-p", "epoch", "3"], "-p epoch: no chosen lab has that parameter; did you mean 'epochs'?"),
        (["--target", "ml.p4d.24xlarg"], "Did you mean 'ml.p4d.24xlarge'"),
        (["--target", "locl"], "Did you mean 'local'"),
        (["--out", "README.md"], "is a file"),
    ],
)
def test_runner_refuses_bad_options_before_any_kernel_starts(tmp_path, monkeypatch, capsys, args, says):
    labs = tmp_path / "labs"
    labs.mkdir()
    _notebook(labs / "01_fine.ipynb", [("params", "target = 'x'\nsmoke = True\nepochs = 1"), ("code", "x = 1")])
    (tmp_path / "README.md").write_text("a file")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as stop:
        run_labs.main(["--labs-dir", "labs", "--out", "out", *args])  # a later --out wins
    assert stop.value.code == 2 and says in capsys.readouterr().err
    assert not (tmp_path / "out").exists()  # nothing written, no kernel started


@pytest.mark.parametrize("extra, offline", [([], "1"), (["-p", "launch", "True"], None)])
def test_a_dry_run_of_every_lab_stays_offline_unless_asked_to_launch(tmp_path, monkeypatch, extra, offline):
    monkeypatch.delenv("WORKSHOP_AWS_OFFLINE", raising=False)  # restored (unset) after the test
    labs = tmp_path / "labs"
    labs.mkdir()
    _notebook(
        labs / "01_fine.ipynb",
        [
            ("params", "target = 'x'\nsmoke = True\nlaunch = False"),
            (
                "code",
                "import os\nfrom helpers import report\nreport.record(offline=os.environ.get('WORKSHOP_AWS_OFFLINE'))",
            ),
        ],
    )
    assert (
        run_labs.main(["--labs-dir", str(labs), "--out", str(tmp_path / "out"), "--target", "ml.g5.2xlarge", *extra])
        == 0
    )
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["labs"][0]["figures"] == {"offline": offline}


def test_a_deep_output_folder_does_not_break_the_kernel_sockets(tmp_path):
    labs = tmp_path / "labs"
    labs.mkdir()
    _notebook(labs / "01_fine.ipynb", [("params", "target = 'x'\nsmoke = True"), ("code", "x = 1")])
    deep = tmp_path / ("a" * 60) / ("b" * 60)  # well past a Unix socket path's ~100 bytes
    assert run_labs.main(["--labs-dir", str(labs), "--out", str(deep), "--target", "local_cpu"]) == 0


def test_a_finished_lab_s_kernel_is_shut_down_without_an_interrupt(monkeypatch):
    import asyncio

    from jupyter_client import AsyncKernelManager

    sent = []

    async def interrupt(self):
        sent.append("SIGINT")

    monkeypatch.setattr(AsyncKernelManager, "_async_interrupt_kernel", interrupt)
    manager = kernels.quiet_shutdown_kernel_manager()()
    manager.shutting_down = True  # what jupyter_client's shutdown sets before it interrupts
    asyncio.run(manager._async_interrupt_kernel())
    manager.shutting_down = False
    asyncio.run(manager._async_interrupt_kernel())
    assert sent == ["SIGINT"]  # a shutdown sends none; a real interrupt still goes through


def test_a_target_given_with_p_is_the_one_checked_and_kept_offline(tmp_path, monkeypatch):
    monkeypatch.delenv("WORKSHOP_AWS_OFFLINE", raising=False)
    labs = tmp_path / "labs"
    labs.mkdir()
    _notebook(
        labs / "01_fine.ipynb",
        [
            ("params", "target = 'x'\nsmoke = True"),
            (
                "code",
                "import os\nfrom helpers import report\nreport.record(offline=os.environ.get('WORKSHOP_AWS_OFFLINE'))",
            ),
        ],
    )
    with pytest.raises(SystemExit):  # the -p target is resolved too
        run_labs.main(["--labs-dir", str(labs), "--out", str(tmp_path / "bad"), "-p", "target", "ml.p4d.24xlarg"])
    assert (
        run_labs.main(["--labs-dir", str(labs), "--out", str(tmp_path / "out"), "-p", "target", "ml.g5.2xlarge"]) == 0
    )
    assert json.loads((tmp_path / "out" / "summary.json").read_text())["labs"][0]["figures"] == {"offline": "1"}
    assert "WORKSHOP_AWS_OFFLINE" not in os.environ  # set for the labs' kernels only


def test_one_output_folder_takes_one_run_at_a_time(tmp_path):
    """Two runs into one --out would interleave their request files and overwrite each other's summary: the
    second is refused before it starts a kernel, naming the folder and what to do."""
    import fcntl

    labs = tmp_path / "labs"
    labs.mkdir()
    _notebook(labs / "01_fine.ipynb", [("params", "target = 'x'\nsmoke = True"), ("code", "x = 1")])
    out = tmp_path / "out"
    out.mkdir()
    with open(out / ".run_labs.lock", "w") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        with pytest.raises(SystemExit, match="another run of course.run_labs is writing to .*--out"):
            run_labs.main(["--labs-dir", str(labs), "--out", str(out), "--target", "local_cpu"])
    assert not (out / "summary.json").exists() and not (out / "01_fine.ipynb").exists()


def test_an_interrupted_run_leaves_its_own_summary_not_the_last_one(tmp_path, monkeypatch):
    labs = tmp_path / "labs"
    labs.mkdir()
    for name in ("01_fine", "02_next"):
        _notebook(labs / f"{name}.ipynb", [("params", "target = 'x'\nsmoke = True"), ("code", "x = 1")])
    out = tmp_path / "out"
    out.mkdir()
    (out / "summary.json").write_text(json.dumps({"labs": [{"lab": "01_fine", "status": "ok"}]}))  # an earlier run

    def interrupted(notebook, *args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(run_labs, "run_lab", interrupted)
    with pytest.raises(KeyboardInterrupt):
        run_labs.main(["--labs-dir", str(labs), "--out", str(out), "--target", "local_cpu", "--streams", "1"])
    summary = json.loads((out / "summary.json").read_text())
    assert [(r["lab"], r["status"]) for r in summary["labs"]] == [("01_fine", "interrupted")]


MEET = """
import json, os, time
from pathlib import Path
from helpers import report
mine, other = Path(meet) / "{me}", Path(meet) / "{other}"
mine.touch()
deadline = time.monotonic() + 120
while not other.exists():  # the other lab must be running now too: one at a time would wait here and fail
    assert time.monotonic() < deadline, "the other lab never ran beside this one"
    time.sleep(0.05)
report.record(cores=sorted(os.sched_getaffinity(0)))
"""


@pytest.fixture
def every_core():
    """The whole run's cores for this test (an xdist worker is pinned to its share of them), then the worker's own."""
    everything = {int(c) for c in os.environ.get("WORKSHOP_TEST_CORES", "").split(",") if c}
    kept = os.sched_getaffinity(0)
    os.sched_setaffinity(0, everything or kept)
    yield sorted(os.sched_getaffinity(0))
    os.sched_setaffinity(0, kept)


def test_two_labs_run_at_once_each_pinned_to_a_core_of_its_own(tmp_path, capsys, every_core):
    if len(every_core) < 2:
        pytest.skip("two streams need two cores")
    labs = tmp_path / "labs"
    labs.mkdir()
    for me, other in (("01_left", "02_right"), ("02_right", "01_left")):
        _notebook(
            labs / f"{me}.ipynb",
            [("params", "target = 'x'\nsmoke = True\nmeet = ''"), ("code", MEET.format(me=me, other=other))],
        )
    _notebook(labs / "03_broken.ipynb", [("params", "target = 'x'\nsmoke = True"), ("code", "raise ValueError('no')")])
    out = tmp_path / "out"
    args = ["--labs-dir", str(labs), "--out", str(out), "--target", "local_cpu", "-p", "meet", str(tmp_path)]
    assert run_labs.main([*args, "--streams", "2"]) == 1
    runs = json.loads((out / "summary.json").read_text())["labs"]
    assert [r["lab"] for r in runs] == ["01_left", "02_right", "03_broken"]  # the labs' order, not the finishing one
    left, right, broken = runs
    assert left["status"] == right["status"] == "ok"
    mine, theirs = left["figures"]["cores"], right["figures"]["cores"]
    assert not set(mine) & set(theirs), "the two streams shared a core"  # each on its own half of the machine
    assert sorted(mine + theirs) == every_core
    assert left["cores"] == left["figures"]["cores"]  # the summary says where each ran
    assert broken["status"] == "failed" and "ValueError: no" in broken["error"]
    assert (out / "03_broken.log").is_file()
    printed = capsys.readouterr()
    assert "2 at a time" in printed.out and "FAILED 03_broken" in printed.err


WHEN = """
import os, time
from helpers import report
report.record(cores=sorted(os.sched_getaffinity(0)), started=time.time())
time.sleep(0.5)
report.record(ended=time.time())
"""


def test_a_lab_needing_more_cores_than_a_stream_runs_alone_on_every_core_first(
    tmp_path, capsys, every_core, monkeypatch
):
    """make on 2 cores: lab 02 (a core per rank) runs alone on both, then the others two at a time, one core each."""
    if len(every_core) < 2:
        pytest.skip("two streams need two cores")
    labs = tmp_path / "labs"
    labs.mkdir()
    for name in ("01_narrow", "02_wide", "03_narrow"):
        _notebook(labs / f"{name}.ipynb", [("params", "target = 'x'\nsmoke = True"), ("code", WHEN)])
    monkeypatch.setitem(lessons.BY_STEM, "02_wide", lab.Lab("02_wide", cores=2, cores_why="a core per rank"))
    out = tmp_path / "out"
    assert run_labs.main(["--labs-dir", str(labs), "--out", str(out), "--target", "local_cpu", "--streams", "2"]) == 0
    runs = {r["lab"]: r["figures"] for r in json.loads((out / "summary.json").read_text())["labs"]}
    assert runs["02_wide"]["cores"] == every_core  # alone, on every core
    assert all(len(runs[n]["cores"]) == len(every_core) // 2 for n in ("01_narrow", "03_narrow"))
    assert runs["02_wide"]["ended"] <= min(runs[n]["started"] for n in ("01_narrow", "03_narrow"))  # nothing beside it
    assert "02_wide alone on cores" in capsys.readouterr().out


def test_a_lesson_too_few_cores_cannot_show_is_listed_not_failed_when_the_lab_says_so(tmp_path, monkeypatch, capsys):
    labs = tmp_path / "labs"
    labs.mkdir()
    said = "from helpers import report\nreport.record(lesson_cores=1)\nreport.cannot_show('two at once', 'one core.')"
    _notebook(labs / "02_wide.ipynb", [("params", "target = 'x'\nsmoke = True"), ("code", said)])
    budget = {"two ranks run near twice as fast": lambda f: f["speedup"] >= 1.3}
    monkeypatch.setitem(
        lessons.BY_STEM, "02_wide", lab.Lab("02_wide", cores=2, cores_why="a rank each", budget_claims=budget)
    )
    args = ["--labs-dir", str(labs), "--out", str(tmp_path / "out"), "--target", "local_cpu", "--streams", "1"]
    assert run_labs.main(args) == 0
    (run,) = json.loads((tmp_path / "out" / "summary.json").read_text())["labs"]
    assert run["lessons_not_shown"] == ["two ranks run near twice as fast (needs 2 cores: a rank each; had 1 free)"]
    assert "note: 02_wide could not show on these cores" in capsys.readouterr().out
    _notebook(labs / "02_wide.ipynb", [("params", "target = 'x'\nsmoke = True"), ("code", said.rsplit("\n", 1)[0])])
    assert run_labs.main(args) == 1  # silent about it: a failed lesson
    (run,) = json.loads((tmp_path / "out" / "summary.json").read_text())["labs"]
    assert "says which lesson it cannot show there" in run["lessons_not_held"][0]
    _notebook(
        labs / "02_wide.ipynb",
        [
            ("params", "target = 'x'\nsmoke = True"),
            ("code", "from helpers import report\nreport.record(lesson_cores=2, speedup=1.1)"),
        ],
    )
    assert run_labs.main(args) == 1  # the cores were there: the lesson is checked, and this run did not show it


def test_streams_are_refused_below_one(tmp_path):
    with pytest.raises(SystemExit):
        run_labs.main(["--out", str(tmp_path / "out"), "--streams", "0"])


def _ready_in(python: str, home, before: str = "") -> subprocess.CompletedProcess:
    """labs/ready.py imported as a lab's kernel imports it (from the labs folder), by ``python`` with ``home``, after
    ``before`` ran in that same interpreter."""
    env = {"HOME": str(home), "PATH": os.environ["PATH"]}
    return subprocess.run(
        [python, "-c", f"{before}\nimport ready"], cwd=lab.LABS_DIR, env=env, capture_output=True, text=True, timeout=60
    )


def test_a_kernel_without_the_helpers_is_told_what_to_do_and_one_started_before_the_install_to_restart(tmp_path):
    import sys

    bare = getattr(sys, "_base_executable", sys.executable)  # this machine's Python, without the .venv's packages
    probe = subprocess.run([bare, "-c", "import helpers"], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    if probe.returncode == 0:
        pytest.skip(f"{bare} has the helpers itself")
    done = _ready_in(bare, tmp_path)
    assert done.returncode != 0 and "ImportError" in done.stderr  # not ModuleNotFoundError: no fallback hides it
    assert "run `make studio`" in done.stderr and "restart this kernel" in done.stderr

    # make studio runs while the kernel is up: the user site, and the helpers' link in it, appear after its start
    install = (
        "import pathlib, site; user = pathlib.Path(site.getusersitepackages()); user.mkdir(parents=True); "
        f"(user / 'workshop.pth').write_text({str(lab.LABS_DIR.parent)!r})"
    )
    late = _ready_in(bare, tmp_path, before=install)
    assert late.returncode != 0 and "after this kernel started" in late.stderr and "restart the kernel" in late.stderr
    assert _ready_in(bare, tmp_path).returncode == 0  # a restarted kernel sees them
    assert _ready_in(sys.executable, tmp_path / "elsewhere").returncode == 0  # the .venv has them


def test_two_labs_at_a_time_only_on_free_cores_of_a_cpu(monkeypatch, capsys):
    from helpers.local import monitor

    monkeypatch.setattr(run_labs.os, "sched_getaffinity", lambda pid: {0, 1})
    monkeypatch.setattr(run_labs, "resolve", lambda target: type("T", (), {"gpus": 1 if target == "gpu" else 0})())
    monkeypatch.setattr(monitor, "free_cores", lambda seconds=1.0: 1.9)
    assert run_labs.default_streams("local_cpu", 8) == 2
    assert run_labs.default_streams("local_cpu", 1) == 1  # one lab
    assert run_labs.default_streams("gpu", 8) == 1  # a GPU is not shared
    assert run_labs.default_streams("ml.g5.xlarge", 8) == 1  # a dry run
    monkeypatch.setattr(monitor, "free_cores", lambda seconds=1.0: 1.1)  # another process holds a core
    assert run_labs.default_streams("local_cpu", 8) == 1
    assert "1.1 of 2 cores free): one lab at a time" in capsys.readouterr().out
