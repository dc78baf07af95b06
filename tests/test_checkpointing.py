"""Checkpoints in-process: exact round trips, atomic writes, corrupt and partial checkpoints, refused resumes."""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import torch
from conftest import SRC

import checkpointing  # noqa: E402
from checkpointing import Checkpointer, CorruptCheckpoint, NoCheckpoints, write_atomic  # noqa: E402


@dataclass
class OneProcess:
    """The slice of train.py's Dist that the checkpointer uses, for one process."""

    rank: int = 0
    local_rank: int = 0
    world: int = 1
    enabled: bool = False
    master: bool = True
    device: torch.device = torch.device("cpu")
    lines: list = field(default_factory=list)

    def print(self, *a):
        self.lines.append(" ".join(map(str, a)))


@dataclass
class History:
    history: list = field(default_factory=list)


@dataclass
class Steps:
    """The loop's counters as train.py's Progress hands them to the checkpointer: state_dict() names the step."""

    step: int = 0
    epoch: int = 0

    def state_dict(self) -> dict:
        return {"step": self.step, "epoch": self.epoch}

    def load_state_dict(self, state: dict) -> None:
        self.step, self.epoch = state["step"], state["epoch"]


class Trainer:
    """A small model trained with dropout, AdamW and a warm-up schedule: every piece of state a resume needs."""

    def __init__(self, seed: int = 0, lr: float = 1e-2):
        torch.manual_seed(seed)
        self.model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Dropout(0.3), torch.nn.Linear(16, 3))
        self.optimizer = torch.optim.AdamW(self.model.parameters(), lr=lr)
        self.schedule = torch.optim.lr_scheduler.LambdaLR(self.optimizer, lambda s: min(1.0, (s + 1) / 5))
        self.scaler = torch.amp.GradScaler("cpu", enabled=False)
        self.metrics = History()
        self.progress = Steps()

    def step(self, step: int) -> float:
        x = torch.randn(4, 8)  # data drawn from the global RNG, like dropout: a resume must restore it
        loss = torch.nn.functional.cross_entropy(self.model(x), torch.tensor([0, 1, 2, 1]))
        loss.backward()
        self.optimizer.step()
        self.optimizer.zero_grad()
        self.schedule.step()
        self.metrics.history.append({"kind": "train", "step": step, "train_loss": loss.item()})
        self.progress.step = step
        return loss.item()

    def checkpointer(
        self, directory: Path, d=None, every: int = 2, keep: int = 3, fingerprint=None, allow=frozenset()
    ) -> Checkpointer:
        return Checkpointer(
            directory,
            d or OneProcess(),
            every,
            keep,
            fingerprint or {"lr": 1e-2, "seed": 0},
            set(allow),
            self.model,
            self.optimizer,
            self.schedule,
            self.scaler,
            self.metrics,
            self.progress,
        )

    def resume(self, directory: Path, d=None) -> int:
        """Resume from ``directory``; the step resumed at (0: nothing to resume)."""
        self.checkpointer(directory, d).resume()
        return self.progress.step


@pytest.fixture(autouse=True)
def keep_sigterm_handler():
    """The checkpointer installs a SIGTERM handler: put pytest's back afterwards."""
    before = signal.getsignal(signal.SIGTERM)
    yield
    signal.signal(signal.SIGTERM, before)


def train(t: Trainer, ckpt, start: int, stop: int) -> list[float]:
    losses = []
    for step in range(start + 1, stop + 1):
        losses.append(t.step(step))
        if ckpt.due(step):
            ckpt.save()
    return losses


def params(t: Trainer) -> list[torch.Tensor]:
    return [p.detach().clone() for p in t.model.parameters()]


@pytest.mark.slow
def test_resume_continues_bit_identically(tmp_path):
    straight = Trainer()
    expected = train(straight, NoCheckpoints(), 0, 10)

    first = Trainer()
    train(first, first.checkpointer(tmp_path), 0, 7)  # saves at 2, 4, 6; steps 7 are lost
    second = Trainer(seed=123)  # another init and RNG position: all of it must come from the checkpoint
    second.checkpointer(tmp_path).resume()
    assert second.progress == Steps(step=6, epoch=0)  # restored as the model is
    resumed = train(second, NoCheckpoints(), 6, 10)
    assert resumed == expected[6:]
    assert all(torch.equal(a, b) for a, b in zip(params(straight), params(second)))
    assert second.metrics.history == straight.metrics.history
    assert second.schedule.get_last_lr() == straight.schedule.get_last_lr()


def test_without_the_rng_state_a_resume_restores_the_rest_and_draws_other_numbers(tmp_path):
    """``--checkpoint_rng false`` (lab 06's exercise): no rank file holds an RNG state, the model, optimizer and
    step still resume, and the steps after it draw other random numbers than the uninterrupted run did."""
    straight = Trainer()
    expected = train(straight, NoCheckpoints(), 0, 10)
    first = Trainer()
    no_rng = {"lr": 1e-2, "seed": 0, "checkpoint_rng": False}
    train(first, first.checkpointer(tmp_path, fingerprint=no_rng), 0, 7)
    saved = sorted(tmp_path.glob("step-*"))[-1]
    rank_file = torch.load(saved / "rank-00000.pt", weights_only=True)
    assert "rng" not in rank_file and rank_file["progress"]["step"] == 6
    second = Trainer(seed=123)
    second.checkpointer(tmp_path, fingerprint=no_rng).resume()
    assert second.progress == Steps(step=6, epoch=0) and second.metrics.history == straight.metrics.history[:6]
    resumed = train(second, NoCheckpoints(), 6, 10)
    assert resumed != expected[6:]  # the same weights went in; other dropout masks and batches came out


def test_nothing_to_resume_starts_fresh(tmp_path):
    t = Trainer()
    d = OneProcess()
    assert t.resume(tmp_path, d) == 0 and t.progress == Steps()
    assert any("event=fresh" in line for line in d.lines)


def test_corrupt_newest_checkpoint_is_skipped_and_set_aside(tmp_path):
    t = Trainer()
    train(t, t.checkpointer(tmp_path), 0, 6)
    newest = tmp_path / "step-00000006" / "state.pt"
    newest.write_bytes(newest.read_bytes()[:100])  # truncated, as an interrupted upload would leave it
    d = OneProcess()
    again = Trainer()
    ckpt = again.checkpointer(tmp_path, d)
    ckpt.resume()
    assert again.progress.step == 4
    assert any("WARNING: skipping checkpoint step-00000006" in line and "checksum" in line for line in d.lines)
    assert not (tmp_path / "step-00000006").exists() and list(tmp_path.glob(".corrupt-step-00000006-*"))
    train(again, ckpt, 4, 6)  # the step's name is free again: a new step 6 replaces the corrupt one
    assert checkpointing.Checkpointer._verify(ckpt, tmp_path / "step-00000006")[0]["step"] == 6


@pytest.mark.parametrize("damage", ["manifest", "missing_rank_file", "flipped_byte"])
def test_every_kind_of_damage_is_detected(tmp_path, damage):
    t = Trainer()
    ckpt = t.checkpointer(tmp_path)
    train(t, ckpt, 0, 2)
    path = tmp_path / "step-00000002"
    if damage == "manifest":
        (path / "manifest.json").write_text("{not json")
    elif damage == "missing_rank_file":
        (path / "rank-00000.pt").unlink()
    else:
        data = bytearray((path / "state.pt").read_bytes())
        data[len(data) // 2] ^= 1
        (path / "state.pt").write_bytes(bytes(data))
    with pytest.raises(CorruptCheckpoint):
        ckpt._verify(path)


def edited(**changes):
    """A manifest edit: each key set to its value, or removed when the value is ``...``."""

    def edit(m: dict) -> dict:
        return {k: v for k, v in {**m, **changes}.items() if v is not ...}

    return edit


def edited_files(**changes):
    return lambda m: {**m, "files": edited(**changes)(m["files"])}


MALFORMED_MANIFESTS = {
    "not_an_object": lambda m: [m],
    "no_fingerprint": edited(fingerprint=...),
    "fingerprint_a_list": edited(fingerprint=[]),
    "no_files": edited(files=...),
    "files_null": edited(files=None),
    "files_without_state": edited_files(**{"state.pt": ...}),
    "files_without_this_rank": edited_files(**{"rank-00000.pt": ...}),
    "files_with_a_path_outside": lambda m: edited_files(**{"../state.pt": m["files"]["state.pt"]})(m),
    "digest_not_a_string": edited_files(**{"state.pt": 0}),
    "no_step": edited(step=...),
    "step_a_string": edited(step="6"),
    "step_of_another_directory": edited(step=4),
    "world_true": edited(world=True),
    "world_zero": edited(world=0),
}


@pytest.mark.parametrize("malformed", MALFORMED_MANIFESTS.values(), ids=MALFORMED_MANIFESTS.keys())
def test_a_manifest_unlike_the_writers_is_corrupt_and_the_older_checkpoint_resumes(tmp_path, malformed):
    t = Trainer()
    train(t, t.checkpointer(tmp_path), 0, 6)
    manifest = tmp_path / "step-00000006" / "manifest.json"
    manifest.write_text(json.dumps(malformed(json.loads(manifest.read_text()))))
    d = OneProcess()
    assert Trainer().resume(tmp_path, d) == 4
    assert any("WARNING: skipping checkpoint step-00000006: its manifest" in line for line in d.lines), d.lines
    assert list(tmp_path.glob(".corrupt-step-00000006-*"))


def test_a_save_interrupted_midway_publishes_nothing(tmp_path, monkeypatch):
    t = Trainer()
    ckpt = t.checkpointer(tmp_path)
    train(t, ckpt, 0, 2)
    real = checkpointing.write_atomic

    def dies_at_manifest(path, data):
        if path.name == "manifest.json":
            raise KeyboardInterrupt("killed while saving")
        real(path, data)

    monkeypatch.setattr(checkpointing, "write_atomic", dies_at_manifest)
    with pytest.raises(KeyboardInterrupt):
        train(t, ckpt, 2, 4)
    assert sorted(p.name for p in tmp_path.iterdir()) == [".partial-step-00000004", "step-00000002"]
    monkeypatch.undo()
    d = OneProcess()
    assert Trainer().resume(tmp_path, d) == 2
    assert not (tmp_path / ".partial-step-00000004").exists()
    assert any("removing .partial-step-00000004" in line for line in d.lines)


def test_atomic_write_leaves_old_file_or_new_file_never_a_short_one(tmp_path, monkeypatch):
    target = tmp_path / "state.pt"
    write_atomic(target, b"old contents")

    def crash(*a):
        raise OSError("power cut before the rename")

    monkeypatch.setattr(os, "replace", crash)
    with pytest.raises(OSError):
        write_atomic(target, b"new contents, longer")
    assert target.read_bytes() == b"old contents"
    monkeypatch.undo()
    write_atomic(target, b"new contents, longer")
    assert target.read_bytes() == b"new contents, longer"


def test_a_full_disk_ends_the_job_with_what_happened_and_keeps_the_saved_checkpoints(tmp_path, monkeypatch):
    import errno

    t = Trainer()
    train(t, t.checkpointer(tmp_path, keep=3), 0, 10)
    saved = {p.name: sorted(f.read_bytes() for f in p.iterdir()) for p in tmp_path.iterdir()}

    def full(*a):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "fsync", full)
    with pytest.raises(SystemExit, match=r"no space left to write this checkpoint .* MB free on its disk\). The "):
        train(t, t.checkpointer(tmp_path, keep=3), 10, 15)
    monkeypatch.undo()
    assert not list(tmp_path.rglob("*.tmp"))  # no half-written file left behind
    kept = {p.name: sorted(f.read_bytes() for f in p.iterdir()) for p in tmp_path.iterdir() if p.name in saved}
    assert kept == saved  # every checkpoint saved before is there, byte for byte


def test_keeps_only_the_newest_k(tmp_path):
    t = Trainer()
    train(t, t.checkpointer(tmp_path, keep=2), 0, 10)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["step-00000008", "step-00000010"]


def test_sigterm_stops_at_the_next_step_with_a_checkpoint(tmp_path):
    t = Trainer()
    ckpt = t.checkpointer(tmp_path, every=1000)
    t.step(1)
    assert not ckpt.due(1)
    os.kill(os.getpid(), signal.SIGTERM)  # the handler only notes it: the process lives on to save
    t.step(2)
    assert ckpt.due(2) and ckpt.stopping
    ckpt.save()
    manifest = json.loads((tmp_path / "step-00000002" / "manifest.json").read_text())
    assert manifest["step"] == 2 and set(manifest["files"]) == {"state.pt", "rank-00000.pt"}
    assert checkpointing.EXIT_STOPPED == 143


@pytest.mark.parametrize("backend", ["nccl", "gloo"])
def test_the_stop_flag_is_reduced_on_the_cpu_under_nccl_and_gloo(tmp_path, monkeypatch, backend):
    """A GPU tensor's .item() each step would make the CPU wait for the GPU: under NCCL the flag goes through one
    gloo group made at construction; under gloo, through the default group. Another rank's SIGTERM (a MAX of 1
    coming back) stops this one too."""
    made, reduced = [], []
    monkeypatch.setattr(checkpointing.dist, "get_backend", lambda group=None: backend)
    monkeypatch.setattr(checkpointing.dist, "new_group", lambda **kw: made.append(kw) or "gloo group")

    def all_reduce(tensor, op, group=None):
        reduced.append((tensor.device.type, op, group))
        tensor.fill_(len(reduced) - 1)  # the first step nobody was signalled; by the second, another rank was

    monkeypatch.setattr(checkpointing.dist, "all_reduce", all_reduce)
    gpu_rank = OneProcess(rank=1, world=2, enabled=True, master=False, device=torch.device("cuda", 0))
    ckpt = Trainer().checkpointer(tmp_path, gpu_rank, every=1000)
    assert made == ([] if backend == "gloo" else [{"backend": "gloo"}])
    assert not ckpt.due(1) and not ckpt.stopping
    assert ckpt.due(2) and ckpt.stopping
    group = None if backend == "gloo" else "gloo group"
    assert reduced == [("cpu", checkpointing.dist.ReduceOp.MAX, group)] * 2
    assert len(made) <= 1  # one group for the whole run, not one per step


def test_under_smddp_the_stop_flag_uses_the_default_group_and_no_new_group(tmp_path, monkeypatch):
    """SMDDP has no new_group() (and no gloo beside it in one process): the flag is summed on the smddp group itself,
    on the rank's device, as float32 (what SMDDP's AllReduce does for DDP's gradients)."""
    reduced = []
    monkeypatch.setattr(checkpointing.dist, "get_backend", lambda group=None: "smddp")

    def no_sub_groups(*a, **kw):
        raise RuntimeError("smddp backend does not support new_group")

    def all_reduce(tensor, op, group=None):
        reduced.append((tensor.device.type, tensor.dtype, op, group))
        tensor.fill_(len(reduced) - 1)

    monkeypatch.setattr(checkpointing.dist, "new_group", no_sub_groups)
    monkeypatch.setattr(checkpointing.dist, "all_reduce", all_reduce)
    rank = OneProcess(rank=1, world=2, enabled=True, master=False)  # the CPU stands in for the GPU here
    ckpt = Trainer().checkpointer(tmp_path, rank, every=1000)
    assert not ckpt.due(1) and ckpt.due(2) and ckpt.stopping
    assert reduced == [("cpu", torch.float32, checkpointing.dist.ReduceOp.SUM, None)] * 2


SMDDP_RANK = r"""
import json, os, sys
import torch, torch.distributed as dist
sys.path[:0] = [os.environ["SRC"], os.environ["FAKE_SMDDP"]]
import smdistributed.dataparallel.torch.torch_smddp  # registers "smddp" (the fake: gloo underneath)


def no_sub_groups(*a, **kw):  # what the real library answers
    raise RuntimeError("smddp backend does not support new_group")


dist.new_group = no_sub_groups
dist.init_process_group(backend="smddp")
from checkpointing import Checkpointer


class D:
    rank = local_rank = dist.get_rank()
    world, enabled, master, device = dist.get_world_size(), True, dist.get_rank() == 0, torch.device("cpu")

    def print(self, *a):
        print(*a, flush=True)


class History:
    history = []


class Steps:
    step = 0

    def state_dict(self):
        return {"step": self.step}

    def load_state_dict(self, state):
        self.step = state["step"]


torch.manual_seed(0)
model = torch.nn.Linear(4, 2)
opt = torch.optim.AdamW(model.parameters())
sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: 1.0)
progress = Steps()
ckpt = Checkpointer(sys.argv[1], D(), 1000, 2, {"seed": 0}, set(), model, opt, sched,
                    torch.amp.GradScaler("cpu", enabled=False), History(), progress)
ckpt.resume()
start = progress.step
seen = []
for step in range(start + 1, start + 4):
    progress.step = step
    if dist.get_rank() == 1 and step == start + 2:
        ckpt._on_sigterm(15, None)  # SIGTERM on rank 1 only
    if ckpt.due(step):
        ckpt.save()
        seen.append(step)
        if ckpt.stopping:
            break
with open(os.path.join(sys.argv[2], f"rank-{dist.get_rank()}.json"), "w") as f:  # ranks' stdout lines can interleave
    json.dump({"backend": dist.get_backend(), "start": start, "saved": seen}, f)
dist.barrier()
dist.destroy_process_group()
sys.stdout.flush()
os._exit(0)  # gloo can abort at interpreter exit (a thread still alive): the results are written already
"""


@pytest.mark.slow
def test_checkpoints_under_a_real_smddp_process_group(tmp_path):
    """Two ranks on the smddp backend (tests/fake_smddp: gloo underneath, with new_group refused as the real one
    refuses it): one rank's SIGTERM stops both at the same step with a checkpoint, and a restart resumes from it."""
    import subprocess

    script = tmp_path / "rank.py"
    script.write_text(SMDDP_RANK)
    env = {
        **os.environ,
        "SRC": str(SRC),
        "FAKE_SMDDP": str(SRC.parent.parent / "tests" / "fake_smddp"),
        "OMP_NUM_THREADS": "1",
    }
    runs = []
    for run in range(2):
        out = tmp_path / f"run-{run}"
        out.mkdir()
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "torch.distributed.run",
                "--standalone",
                "--nproc_per_node",
                "2",
                str(script),
                str(tmp_path / "ckpt"),
                str(out),
            ],
            env=env,
            capture_output=True,
            text=True,
            timeout=180,
        )
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
        runs.append([json.loads((out / f"rank-{rank}.json").read_text()) for rank in (0, 1)])
    first, second = runs
    assert [r["backend"] for r in first] == ["smddp", "smddp"]
    assert [r["saved"] for r in first] == [[2], [2]]  # both ranks stopped at rank 1's signal, checkpointed together
    assert [r["start"] for r in second] == [2, 2], runs  # and the restart resumed there on both


def test_resume_with_changed_settings_is_refused(tmp_path):
    t = Trainer()
    train(t, t.checkpointer(tmp_path, fingerprint={"lr": 1e-2, "seed": 0, "model_size": "tiny"}), 0, 2)
    other = Trainer()
    ckpt = other.checkpointer(tmp_path, fingerprint={"lr": 2e-2, "seed": 0, "model_size": "base"})
    before = params(other)
    saved = list(torch.load(tmp_path / "step-00000002" / "state.pt", weights_only=True)["model"].values())
    assert len(saved) == len(before) and not any(torch.equal(a, b) for a, b in zip(before, saved))  # a load shows
    with pytest.raises(SystemExit) as refused:
        ckpt.resume()
    message = str(refused.value.code)
    assert "refusing to resume" in message and "lr: 0.01 in the checkpoint, 0.02 now" in message
    assert "model_size: 'tiny' in the checkpoint, 'base' now" in message and "--resume_allow_changes" in message
    assert all(torch.equal(a, b) for a, b in zip(before, params(other)))  # refused before loading anything


def test_an_allowed_lr_change_is_applied_not_mixed(tmp_path):
    t = Trainer()
    train(t, t.checkpointer(tmp_path), 0, 6)
    other = Trainer(lr=5e-2)
    d = OneProcess()
    ckpt = other.checkpointer(tmp_path, d, fingerprint={"lr": 5e-2, "seed": 0}, allow={"lr"})
    ckpt.resume()
    assert other.progress.step == 6
    assert any("resuming with lr changed: 0.01 -> 0.05" in line for line in d.lines)
    factor = min(1.0, (6 + 1) / 5)
    assert other.optimizer.param_groups[0]["lr"] == pytest.approx(5e-2 * factor)
    assert other.schedule.base_lrs == [5e-2]
    other.step(7)
    assert other.schedule.get_last_lr()[0] == pytest.approx(5e-2)


def args(**over) -> argparse.Namespace:
    base = dict(
        checkpoint_dir="/tmp/x",
        checkpoint_every=5,
        checkpoint_keep=2,
        resume_allow_changes="",
        lr=1e-3,
        train="/a/train",
        model_dir="/a/model",
        unknown=[],
    )
    return argparse.Namespace(**{**base, **over})


def test_from_args_off_is_a_no_op(tmp_path):
    off = Checkpointer.from_args(args(checkpoint_every=0), OneProcess(), {})
    assert isinstance(off, NoCheckpoints) and not off.due(5) and off.resume() is None and off.save() is None


def test_from_args_fingerprint_leaves_out_paths_and_refuses_unadjustable_overrides(tmp_path):
    t = Trainer()
    ckpt = Checkpointer.from_args(
        args(checkpoint_dir=str(tmp_path)),
        OneProcess(),
        {"world": 1, "labels": ("a",)},
        model=t.model,
        optimizer=t.optimizer,
        schedule=t.schedule,
        scaler=t.scaler,
        metrics=t.metrics,
        progress=t.progress,
    )
    assert ckpt.fingerprint == {"lr": 1e-3, "world": 1, "labels": ["a"]}
    with pytest.raises(SystemExit, match="model_size needs a fresh --checkpoint_dir"):
        Checkpointer.from_args(args(resume_allow_changes="lr,model_size"), OneProcess(), {})


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--repeats", "0"], "--repeats 0: must be at least 1"),
        (["--every", "50", "0"], "--every 50 0: must be at least 1"),
        (["--tmp", "{missing}"], "--tmp {missing}: not a writable directory; create it"),
        (["--tmp", "{a_file}"], "--tmp {a_file}: not a writable directory; create it"),
    ],
)
def test_overhead_benchmark_refuses_bad_arguments_before_building_a_model(tmp_path, monkeypatch, capsys, argv, message):
    import checkpoint_overhead

    monkeypatch.setattr(checkpoint_overhead, "measure", lambda *a: pytest.fail("built and trained before refusing"))
    (tmp_path / "file").write_text("")
    paths = {"missing": tmp_path / "missing", "a_file": tmp_path / "file"}
    with pytest.raises(SystemExit) as refused:
        checkpoint_overhead.main([a.format(**paths) for a in argv])
    assert refused.value.code == 2 and message.format(**paths) in capsys.readouterr().err


def test_unwritable_checkpoint_dir_says_what_to_do(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(SystemExit, match="cannot write checkpoints to .* Job\\(checkpoints=True\\)"):
        Trainer().checkpointer(blocker / "ckpt")


def test_a_read_only_checkpoint_dir_fails_at_start_not_at_the_first_save(tmp_path, monkeypatch):
    """The directory exists, so mkdir passes; a read-only mount (EROFS) refuses the first file written in it."""
    real_open = open

    def read_only_mount(path, *a, **kw):
        if Path(path).parent == tmp_path and "w" in (a[0] if a else kw.get("mode", "r")):
            raise OSError(30, "Read-only file system", str(path))
        return real_open(path, *a, **kw)

    monkeypatch.setattr(checkpointing, "open", read_only_mount, raising=False)
    with pytest.raises(SystemExit, match="cannot write checkpoints to .*Read-only file system.*--checkpoint_dir"):
        Trainer().checkpointer(tmp_path)
    assert list(tmp_path.iterdir()) == []
    monkeypatch.undo()
    Trainer().checkpointer(tmp_path)  # a writable one: the probe leaves nothing behind
    assert list(tmp_path.iterdir()) == []


def test_a_model_gone_nan_is_never_checkpointed_over_the_good_ones(tmp_path):
    t = Trainer()
    ckpt = t.checkpointer(tmp_path)
    train(t, ckpt, 0, 2)
    with torch.no_grad():
        t.model[0].weight[0, 0] = float("nan")  # what a diverged update leaves
    t.progress.step = 4
    with pytest.raises(SystemExit, match="step 4: the weights hold nan or inf .* Lower --lr"):
        ckpt.save()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["step-00000002"]  # nothing partial either
    assert Trainer(seed=1).resume(tmp_path) == 2
