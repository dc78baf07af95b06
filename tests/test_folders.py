"""Folders that runs share or own: two runs at once never break each other's."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import nbformat
import pytest
from conftest import REPO

from helpers import folders

# waits for a start signal, then builds the shared folder slowly (so that the two builds overlap) and says what it got
RACER = textwrap.dedent("""
    import json, os, sys, time
    from pathlib import Path
    from helpers import folders

    dest, go = Path(sys.argv[1]), Path(sys.argv[2])

    def build(out):
        out.mkdir()
        for i in range(5):
            (out / f"part-{i}").write_text(str(os.getpid()))
            time.sleep(0.2)

    while not go.exists():
        time.sleep(0.01)
    got = folders.build_once(dest, build)
    print(json.dumps({"writers": sorted({p.read_text() for p in got.iterdir()}), "files": len(list(got.iterdir()))}))
""")


def _start(code: str, *args, cwd: Path = REPO) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-c", code, *map(str, args)],
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_two_processes_building_one_shared_folder_at_once_both_use_one_whole_copy(tmp_path):
    dest, go = tmp_path / "shared" / "data", tmp_path / "go"
    racers = [_start(RACER, dest, go) for _ in range(2)]
    time.sleep(1)  # both started and waiting
    go.touch()
    said = [r.communicate(timeout=60) for r in racers]
    assert [r.returncode for r in racers] == [0, 0], said
    seen = [json.loads(out) for out, _ in said]
    assert seen[0] == seen[1] and seen[0]["files"] == 5 and len(seen[0]["writers"]) == 1  # one whole copy, for both
    assert {p.read_text() for p in dest.iterdir()} == set(seen[0]["writers"])
    assert sorted(p.name for p in dest.parent.iterdir()) == ["data"]  # the loser's copy and both locks are gone


def test_a_failed_build_leaves_nothing_and_the_next_one_builds(tmp_path):
    def broken(out):
        out.mkdir()
        (out / "half").write_text("x")
        raise RuntimeError("the generator broke")

    with pytest.raises(RuntimeError, match="the generator broke"):
        folders.build_once(tmp_path / "data", broken)
    assert list(tmp_path.iterdir()) == []
    assert folders.build_once(tmp_path / "data", lambda out: out.mkdir()).is_dir()


OWNER = textwrap.dedent("""
    import sys, time
    from helpers import folders

    print(folders.own_folder(sys.argv[1]), flush=True)
    time.sleep(600)
""")


def test_a_run_s_own_folder_is_removed_only_once_its_process_is_gone(tmp_path):
    other = _start(OWNER, tmp_path)
    try:
        theirs = Path(other.stdout.readline().strip())
        (theirs / "store").mkdir()
        mine = folders.own_folder(tmp_path)
        assert mine != theirs and mine.parent == theirs.parent == tmp_path.resolve()
        assert (theirs / "store").is_dir()  # alive: kept
        with pytest.raises(folders.FolderError, match="another run may be using it"):
            folders.release(theirs)
        assert theirs.is_dir()
    finally:
        other.kill()
        other.wait()
    again = folders.own_folder(tmp_path)
    assert not theirs.exists() and mine.is_dir() and again.is_dir()  # its process died: its folder went
    folders.release(mine)
    folders.release(again)
    assert list(tmp_path.iterdir()) == []


# lab 05's parameters and set-up cells, with a tiny catalogue, the shared folders in a test folder
LAB05_SETUP = textwrap.dedent("""
    import sys
    from pathlib import Path
    import helpers.jobs

    params, setup, shared, runs_dir = sys.argv[1:]
    helpers.jobs.RUNS_DIR = Path(shared)
    from IPython.display import display  # a notebook's built-in
    ns = {"display": display}
    exec(params, ns)
    ns.update(rows=4000, shards=2, runs_dir=runs_dir)
    exec(setup, ns)
    print(ns["DATA"], ns["LAB"], sep="\\n")
""")


@pytest.mark.slow
def test_two_runs_of_lab_05_s_set_up_at_once_do_not_break_each_other(tmp_path):
    nb = nbformat.read(REPO / "labs" / "05_input_modes.ipynb", as_version=4)
    code = [c for c in nb.cells if c.cell_type == "code"]
    (at,) = [i for i, c in enumerate(code) if "parameters" in c.metadata.get("tags", [])]
    params, setup = code[at].source, code[at + 1].source
    # in the labs' folder, as a kernel runs a lab (its first import, labs/ready.py, lives there)
    args = (LAB05_SETUP, params, setup, tmp_path / "runs", tmp_path / "out")
    runs = [_start(*args, cwd=REPO / "labs") for _ in range(2)]
    said = [r.communicate(timeout=300) for r in runs]
    assert [r.returncode for r in runs] == [0, 0], [err[-2000:] for _, err in said]
    (data,) = {out.splitlines()[-2] for out, _ in said}
    labs = {out.splitlines()[-1] for out, _ in said}
    assert len(labs) == 2  # a folder each
    assert json.loads((Path(data) / "manifest.json").read_text())["rows"] == 4000
    assert sorted(p.name for p in (tmp_path / "runs" / "data").iterdir()) == [Path(data).name]


def test_cells_run_again_after_the_clean_up_are_refused_instead_of_leaving_a_folder_nothing_removes(tmp_path):
    """Lab 05's clean-up cell releases its folder; a job or a store cell run after it would make the folder anew
    without its lock (115 MB stayed that no later run removed). They are refused, saying to run the set-up cell."""
    from helpers.local.runner import LocalRunner
    from sagemaker_standin import StandInError
    from sagemaker_standin.objectstore import ObjectStore

    lab = folders.own_folder(tmp_path, prefix="lab05-")
    (lab / "jobs").mkdir()
    folders.release(lab)
    with pytest.raises(folders.FolderError, match="removed by the lab's clean-up cell.*set-up cell again"):
        LocalRunner(runs_dir=lab / "jobs", echo=False)
    with pytest.raises(StandInError, match="does not exist.*run the set-up cell again"):  # the store: its folder gone
        ObjectStore(lab / "store")
    assert not lab.exists()
    LocalRunner(runs_dir=folders.own_folder(tmp_path, prefix="lab05-") / "jobs", echo=False)  # a new folder: fine


def test_a_copy_the_check_refuses_is_built_again_and_a_good_one_kept(tmp_path):
    """Lab 05's generated catalogue is shared between runs; one an older version made (its manifest lists no
    checksums) or a damaged one is built again, not trusted and not refused forever."""
    from helpers.errors import WorkshopError

    dest, built = tmp_path / "data", []

    def build(path):
        built.append(path)
        path.mkdir()
        (path / "version").write_text("new")

    def check(path):
        if (path / "version").read_text() != "new":
            raise WorkshopError("made by an older version")

    dest.mkdir()
    (dest / "version").write_text("old")
    assert folders.build_once(dest, build, check=check) == dest and (dest / "version").read_text() == "new"
    assert folders.build_once(dest, build, check=check) == dest and len(built) == 1  # the good copy is kept
    assert [p.name for p in tmp_path.iterdir()] == ["data"]  # the refused copy went with the build's folder
