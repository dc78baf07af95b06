"""Checkpoints that survive a spot reclaim: saved every N steps (and on a SIGTERM that arrives), resumed exactly.

A checkpoint is one directory in the contract's checkpoint dir (``/opt/ml/checkpoints``, which SageMaker syncs with
the job's CheckpointConfig S3 URI and copies back into a restarted spot job)::

    step-00000120/
        state.pt        model, optimizer, scheduler, grad scaler, metric history (shared by all ranks)
        rank-00000.pt   one per rank: its RNG states (torch CPU/CUDA, python, numpy) and progress counters
        manifest.json   step, world size, the run's fingerprint and a SHA-256 per file; written last

It is built as ``.partial-step-00000120/`` and renamed into place once complete; every file goes through temp
file, fsync, rename, fsync of the directory. A SIGKILL mid-save leaves only a partial directory, which no restart
reads. On start the newest checkpoint whose files all match its manifest wins; a corrupt or truncated one is logged,
set aside as ``.corrupt-step-...`` and the next older one is tried.

Resuming is refused (with the differences named) when the checkpoint comes from a run that computes something else:
another model, batch, lr, seed, data or world size. ``--resume_allow_changes max_steps,lr`` accepts the few changes
the script can honour explicitly (a longer schedule, a new learning rate).
"""

from __future__ import annotations

import errno
import hashlib
import io
import json
import os
import random
import re
import shutil
import signal
import sys
import time
from pathlib import Path

import torch
import torch.distributed as dist

FORMAT = 1
EXIT_STOPPED = 128 + signal.SIGTERM  # the shell's "terminated by SIGTERM": saved, but the job did not finish
STEP_DIR = re.compile(r"^step-(\d{8,})$")
# arguments that may differ between a job and its restart without changing what it computes: paths (new for every
# local launch), the checkpoint settings themselves, the collective backend, data-loader workers, profiling
RESUME_SAFE = frozenset(
    {
        "train",
        "validation",
        "pretrained",
        "model_dir",
        "output_data_dir",
        "checkpoint_dir",
        "checkpoint_every",
        "checkpoint_keep",
        "resume_allow_changes",
        "backend",
        "dist_timeout_s",
        "unknown",
        "num_workers",
        "pin_memory",
        "persistent_workers",
        "profile",
        "profile_dir",
        "profile_schedule",
    }
)
# changes a restart can honour when asked to: a longer or shorter schedule, logging, a new lr or weight decay
ADJUSTABLE = frozenset({"epochs", "max_steps", "total_steps", "log_every", "evals_per_epoch", "lr", "weight_decay"})
# the manifest save() writes, by type: anything else came from elsewhere (`type(v) is int` also refuses true/false)
MANIFEST_TYPES = {"format": int, "step": int, "world": int, "files": dict, "fingerprint": dict}
SHA256 = re.compile(r"^[0-9a-f]{64}$")


class CorruptCheckpoint(Exception):
    """A checkpoint directory that does not load or does not match its manifest."""


def write_atomic(path: Path, data: bytes) -> None:
    """All of ``data`` at ``path``, or nothing: a crash leaves at most ``path.tmp``, never a short ``path``. A full
    disk ends the job with what happened and what to do; the checkpoints already saved stay as they were."""
    tmp = path.with_name(path.name + ".tmp")
    try:
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except OSError as err:
        tmp.unlink(missing_ok=True)
        if err.errno not in (errno.ENOSPC, errno.EDQUOT):
            raise
        free = shutil.disk_usage(path.parent).free
        raise SystemExit(
            f"{path}: no space left to write this checkpoint ({len(data) / 2**20:.1f} MB to write, "
            f"{free / 2**20:.1f} MB free on its disk). The checkpoints already saved beside it are intact. Free "
            f"space there, keep fewer (--checkpoint_keep), or give the job a checkpoint directory on a disk with room."
        ) from None
    fsync_dir(path.parent)


def finite_weights(model) -> bool:
    """Whether every weight is a number (no nan, no inf): one device sync for the whole model."""
    return bool(torch.stack([torch.isfinite(p).all() for p in model.parameters()]).all())


def fsync_dir(path: Path) -> None:
    """Make a rename durable: the directory entry itself must reach the disk."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def serialize(obj) -> tuple[bytes, str]:
    buf = io.BytesIO()
    torch.save(obj, buf)
    data = buf.getvalue()
    return data, hashlib.sha256(data).hexdigest()


def rng_state(device: torch.device) -> dict:
    state = {"torch": torch.get_rng_state(), "python": random.getstate()}
    if device.type == "cuda":
        state["cuda"] = torch.cuda.get_rng_state(device)
    np = sys.modules.get("numpy")  # only if something loaded it: this script draws nothing from numpy itself
    if np is not None:
        kind, keys, pos, has_gauss, gauss = np.random.get_state()
        state["numpy"] = (kind, torch.from_numpy(keys.astype("int64")), pos, has_gauss, gauss)
    return state


def set_rng_state(state: dict, device: torch.device) -> None:
    torch.set_rng_state(state["torch"])
    random.setstate(state["python"])
    if "cuda" in state and device.type == "cuda":
        torch.cuda.set_rng_state(state["cuda"], device)
    np = sys.modules.get("numpy")
    if np is not None and "numpy" in state:
        kind, keys, pos, has_gauss, gauss = state["numpy"]
        np.random.set_state((kind, keys.numpy().astype("uint32"), pos, has_gauss, gauss))


def differences(saved: dict, current: dict) -> dict[str, tuple]:
    """``{key: (in the checkpoint, now)}`` for every fingerprint entry that differs."""
    missing = "(absent)"
    return {
        k: (saved.get(k, missing), current.get(k, missing))
        for k in sorted(set(saved) | set(current))
        if saved.get(k, missing) != current.get(k, missing)
    }


def rank_file(rank: int) -> str:
    return f"rank-{rank:05d}.pt"


def manifest_problem(manifest, step: int) -> str | None:
    """What makes ``manifest`` other than the one :meth:`Checkpointer.save` writes for ``step``; None if nothing.

    The file names must be exactly the writer's (state.pt and one per rank of its world): a rank that is not in
    the manifest's world is a world-size change, which the fingerprint names, not a corrupt checkpoint.
    """
    if type(manifest) is not dict:
        return f"is a JSON {type(manifest).__name__}, not an object"
    wrong = [
        f"{k} ({type(manifest[k]).__name__ if k in manifest else 'absent'}, not {kind.__name__})"
        for k, kind in MANIFEST_TYPES.items()
        if type(manifest.get(k)) is not kind
    ]
    if wrong:
        return f"has no valid {', '.join(wrong)}"
    files, world = manifest["files"], manifest["world"]
    if manifest["format"] != FORMAT:
        return f"has format {manifest['format']}, not {FORMAT}"
    if manifest["step"] != step:
        return f"says step {manifest['step']}, but its directory is step {step}"
    # `or` short-circuits: the expected names are only built when their count matches (a huge world costs nothing)
    if world < 1 or len(files) != world + 1 or set(files) != {"state.pt", *(rank_file(r) for r in range(world))}:
        return f"lists {_short(sorted(files))}, not state.pt and one rank file for each of its {world} ranks"
    if bad := [name for name, digest in files.items() if type(digest) is not str or not SHA256.match(digest)]:
        return f"has no SHA-256 for {', '.join(bad)}"
    return None


def _short(value) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


class Checkpointer:
    """Saves and restores everything the loop's future depends on; see the module docstring for the layout.

    ``d`` is the script's ``Dist`` (rank, local_rank, world, enabled, master, device, print). The model, optimizer,
    schedule and scaler are saved and restored through their ``state_dict``/``load_state_dict`` (rank 0's, shared),
    the metric history as ``metrics.history``, and ``progress`` the same way as the model, but per rank: the loop's
    counters, whose ``state_dict()`` names the ``step`` a checkpoint is saved at.
    """

    def __init__(
        self,
        directory: str | Path,
        d,
        every: int,
        keep: int,
        fingerprint: dict,
        allow_changes: set[str],
        model,
        optimizer,
        schedule,
        scaler,
        metrics,
        progress,
    ):
        self.dir, self.d, self.every, self.keep = Path(directory), d, every, max(1, keep)
        self.fingerprint, self.allow_changes = fingerprint, allow_changes
        self.keep_rng = fingerprint.get("checkpoint_rng", True)  # train.py's --checkpoint_rng
        self.model, self.optimizer, self.schedule = model, optimizer, schedule
        self.scaler, self.metrics, self.progress = scaler, metrics, progress
        self.stopping = False
        self._signalled = False
        self._smddp = d.enabled and dist.get_backend() == "smddp"  # no sub-groups there: see _cpu_group
        self._flag_group = self._cpu_group()
        try:  # a directory that takes no file fails the job now, not at the first save, hours in
            self.dir.mkdir(parents=True, exist_ok=True)
            probe = self.dir / f".write-probe-{d.rank:05d}"  # one per rank: ranks may share the directory
            write_atomic(probe, b"")
            probe.unlink()
        except OSError as err:
            raise SystemExit(
                f"cannot write checkpoints to {self.dir} ({err}): pass a writable --checkpoint_dir, or set "
                f"Job(checkpoints=True) so the runner provides /opt/ml/checkpoints"
            ) from None
        # a SIGTERM that reaches the script (StopTrainingJob's, where the container passes it on; in an SDK v3 job
        # its first process drops it): note it, act at the next step boundary. Periodic saves are the guarantee.
        signal.signal(signal.SIGTERM, self._on_sigterm)

    @classmethod
    def from_args(cls, args, d, facts: dict, **objects):
        """The checkpointer ``args`` ask for: a :class:`NoCheckpoints` when ``--checkpoint_every`` is 0."""
        if args.checkpoint_every <= 0:
            return NoCheckpoints()
        fingerprint = {k: v for k, v in sorted(vars(args).items()) if k not in RESUME_SAFE}
        fingerprint.update(json.loads(json.dumps(facts)))  # tuples become lists, as they will in the manifest
        allowed = {k.strip() for k in args.resume_allow_changes.split(",") if k.strip()}
        if allowed - ADJUSTABLE:
            raise SystemExit(
                f"--resume_allow_changes {args.resume_allow_changes}: only "
                f"{', '.join(sorted(ADJUSTABLE))} can change on resume; a change to "
                f"{', '.join(sorted(allowed - ADJUSTABLE))} needs a fresh --checkpoint_dir"
            )
        if "epochs" in allowed or "max_steps" in allowed:
            allowed.add("total_steps")
        return cls(args.checkpoint_dir, d, args.checkpoint_every, args.checkpoint_keep, fingerprint, allowed, **objects)

    def _on_sigterm(self, signum, frame) -> None:
        self._signalled = True

    # ------------------------------------------------------------------------------------------------------ saving
    def due(self, step: int) -> bool:
        """Every ``every`` steps, and at the step where any rank has seen SIGTERM: all ranks agree on it (an
        all-reduce MAX each step), since a rank that stops alone would hang the others in the next collective."""
        self.stopping = self._any_rank_signalled()
        return self.stopping or step % self.every == 0

    def save(self) -> None:
        """Write the checkpoint for the progress's step (every rank calls this at the same step)."""
        t0 = time.perf_counter()
        progress = self.progress.state_dict()
        d, name = self.d, f"step-{progress['step']:08d}"
        if not finite_weights(self.model):  # every rank holds the same weights: all of them stop here
            raise SystemExit(
                f"step {progress['step']}: the weights hold nan or inf (training diverged), so no checkpoint is "
                f"saved; the good ones in {self.dir} are kept. Lower --lr, or train in fp32 (--precision fp32)"
            )
        partial = self.dir / f".partial-{name}"
        partial.mkdir(exist_ok=True)
        mine = {"rng": rng_state(d.device)} if self.keep_rng else {}  # --checkpoint_rng false: the lesson of lab 06
        files = {rank_file(d.rank): {**mine, "progress": progress}}
        if d.rank == 0:
            files["state.pt"] = {
                "model": self.model.state_dict(),
                "optimizer": self.optimizer.state_dict(),
                "schedule": self.schedule.state_dict(),
                "scaler": self.scaler.state_dict(),
                "history": self.metrics.history,
            }
        sums, size = {}, 0
        for fname, obj in files.items():
            data, sums[fname] = serialize(obj)
            write_atomic(partial / fname, data)
            size += len(data)
        sums = self._gather(sums)
        if d.rank == 0:
            manifest = {
                "format": FORMAT,
                "step": progress["step"],
                "world": d.world,
                "files": sums,
                "fingerprint": self.fingerprint,
                "saved_at": time.time(),
            }
            write_atomic(partial / "manifest.json", json.dumps(manifest, indent=1).encode())
        self._barrier()
        if d.local_rank == 0:  # each host renames its own copy (on one host, or a shared dir, one of them does)
            self._publish(partial, self.dir / name)
            self._prune()
        self._barrier()  # nobody leaves (or gets stopped by torchrun) before the checkpoint is in place
        reason = "signal" if self.stopping else "every"
        d.print(
            f"[checkpoint] event=saved step={progress['step']} reason={reason} "
            f"seconds={time.perf_counter() - t0:.4f} mb={size / 2**20:.2f}"
        )

    def _publish(self, partial: Path, final: Path) -> None:
        try:
            if final.exists():  # a stale copy of this step (its successor was lost): the new one replaces it
                shutil.rmtree(final)
            os.replace(partial, final)
            fsync_dir(self.dir)
        except FileNotFoundError:
            pass  # another host sharing this directory published it first

    def _prune(self) -> None:
        for old in self._checkpoints()[self.keep :]:
            shutil.rmtree(old, ignore_errors=True)

    def _checkpoints(self) -> list[Path]:
        """Published checkpoints, newest first."""
        found = [(int(m[1]), p) for p in self.dir.iterdir() if (m := STEP_DIR.match(p.name)) and p.is_dir()]
        return [p for _, p in sorted(found, reverse=True)]

    # ----------------------------------------------------------------------------------------------------- resuming
    def resume(self) -> None:
        """Restore the newest good checkpoint, progress included; with none, everything stays as it is."""
        d = self.d
        if d.local_rank == 0:
            for stale in self.dir.glob(".partial-*"):
                d.print(f"[checkpoint] removing {stale.name}: the job stopped while writing it")
                shutil.rmtree(stale, ignore_errors=True)
        self._barrier()
        chosen, corrupt = None, []
        for path in self._checkpoints():
            try:
                chosen = (path, *self._verify(path))
                break
            except CorruptCheckpoint as err:
                d.print(f"WARNING: skipping checkpoint {path.name}: {err}; trying an older one")
                corrupt.append(path)
        step = chosen[1]["step"] if chosen else -1
        if self._all_reduce(step, dist.ReduceOp.MAX) != self._all_reduce(step, dist.ReduceOp.MIN):
            raise SystemExit(
                f"the ranks found different checkpoints in {self.dir} (rank {d.rank}: {step}): every "
                f"host must see the same checkpoint directory"
            )
        self._barrier()
        if d.local_rank == 0:  # set aside, not deleted: the evidence stays, and the step name is free again
            for path in corrupt:
                os.replace(path, path.with_name(f".corrupt-{path.name}-{int(time.time())}"))
        if chosen is None:
            d.print(f"[checkpoint] event=fresh step=0 dir={self.dir}")
            return
        path, manifest, blobs = chosen
        self._check_fingerprint(manifest["fingerprint"], path)
        state = torch.load(io.BytesIO(blobs["state.pt"]), map_location=d.device, weights_only=True)
        mine = torch.load(io.BytesIO(blobs[rank_file(d.rank)]), map_location="cpu", weights_only=True)
        self.model.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.schedule.load_state_dict(state["schedule"])
        self.scaler.load_state_dict(state["scaler"])
        self._apply_allowed_changes(manifest["fingerprint"])
        self.metrics.history = state["history"] if d.master else []
        self.progress.load_state_dict(mine["progress"])
        if "rng" in mine:  # last: nothing after this may draw random numbers before the loop
            set_rng_state(mine["rng"], d.device)
        d.print(f"[checkpoint] event=resumed step={manifest['step']} from={path.name}")

    def _verify(self, path: Path) -> tuple[dict, dict[str, bytes]]:
        """The manifest and every file's bytes, checked against their SHA-256; :class:`CorruptCheckpoint` if not."""
        try:
            manifest = json.loads((path / "manifest.json").read_text())
        except (OSError, ValueError) as err:
            raise CorruptCheckpoint(f"no readable manifest ({type(err).__name__}: {err})") from None
        if problem := manifest_problem(manifest, int(STEP_DIR.match(path.name)[1])):
            raise CorruptCheckpoint(f"its manifest {problem}")
        blobs = {}
        for fname, digest in manifest["files"].items():
            try:
                blobs[fname] = (path / fname).read_bytes()
            except OSError as err:
                raise CorruptCheckpoint(f"{fname} is missing ({err.strerror})") from None
            if hashlib.sha256(blobs[fname]).hexdigest() != digest:
                raise CorruptCheckpoint(
                    f"{fname} does not match its checksum ({len(blobs[fname])} bytes: truncated or corrupt)"
                )
        return manifest, blobs

    def _check_fingerprint(self, saved: dict, path: Path) -> None:
        changed = differences(saved, self.fingerprint)
        refused = {k: v for k, v in changed.items() if k not in self.allow_changes}
        if refused:
            lines = "\n".join(
                f"  {k}: {_short(old)} in the checkpoint, {_short(new)} now" for k, (old, new) in refused.items()
            )
            raise SystemExit(
                f"refusing to resume from {path}: it was written by a run with other settings, and mixing them "
                f"would silently train something else:\n{lines}\nRestore those values, point --checkpoint_dir at a "
                f"fresh directory to start over, or (only for {', '.join(sorted(ADJUSTABLE - {'total_steps'}))}) "
                f"accept the change with --resume_allow_changes."
            )
        for k, (old, new) in changed.items():
            self.d.print(
                f"[checkpoint] resuming with {k} changed: {_short(old)} -> {_short(new)} (--resume_allow_changes)"
            )

    def _apply_allowed_changes(self, saved: dict) -> None:
        """The optimizer state carries the old lr and weight decay: a change asked for must be applied on top."""
        changed = differences(saved, self.fingerprint)
        if "lr" in changed:
            lr = self.fingerprint["lr"]
            self.schedule.base_lrs = [lr for _ in self.optimizer.param_groups]
            for group, factor in zip(self.optimizer.param_groups, self.schedule.lr_lambdas):
                group["initial_lr"] = lr
                group["lr"] = lr * factor(self.schedule.last_epoch)
            self.schedule._last_lr = [g["lr"] for g in self.optimizer.param_groups]
        if "weight_decay" in changed:
            for group in self.optimizer.param_groups:
                group["weight_decay"] = self.fingerprint["weight_decay"]

    # ------------------------------------------------------------------------------------------------ collectives
    def _cpu_group(self):
        """The group for the per-step stop flag: the default one under gloo, else one gloo group made once (every
        rank constructs the checkpointer at the same point, so every rank calls ``new_group`` in the same order).
        Under SMDDP, the default one too: SMDDP has no ``new_group()`` and cannot share a process with a gloo group,
        so the flag goes through the smddp group, on the device (see :meth:`_any_rank_signalled`)."""
        if not self.d.enabled or self._smddp or dist.get_backend() == "gloo":
            return None
        return dist.new_group(backend="gloo")

    def _any_rank_signalled(self) -> bool:
        if not self.d.enabled:
            return self._signalled
        if self._smddp:
            # no gloo group to use: the device, and the reduction SMDDP's AllReduce is built for (a float32 SUM, as
            # DDP's gradients); the .item() makes the CPU wait for the GPU once a step, a small price
            flag = torch.tensor([float(self._signalled)], dtype=torch.float32, device=self.d.device)
            dist.all_reduce(flag, op=dist.ReduceOp.SUM)
            return flag.item() > 0
        # a CPU tensor on gloo: a GPU tensor's .item() each step would make the CPU wait for the GPU (no run-ahead)
        flag = torch.tensor([int(self._signalled)], dtype=torch.int64)
        dist.all_reduce(flag, op=dist.ReduceOp.MAX, group=self._flag_group)
        return bool(flag.item())

    def _all_reduce(self, value: int, op) -> int:
        if not self.d.enabled:
            return value
        t = torch.tensor([value], dtype=torch.int64, device=self.d.device)
        dist.all_reduce(t, op=op)
        return int(t.item())

    def _gather(self, sums: dict) -> dict:
        if not self.d.enabled:
            return sums
        every = [None] * self.d.world
        dist.all_gather_object(every, sums)
        return {k: v for part in every for k, v in part.items()}

    def _barrier(self) -> None:
        if self.d.enabled:
            dist.barrier()


class NoCheckpoints:
    """Checkpointing off (``--checkpoint_every 0``): the loop calls the same methods, which do nothing."""

    stopping = False

    def resume(self) -> None:
        pass

    def due(self, step: int) -> bool:
        return False

    def save(self) -> None:
        pass
