"""Lab 08's training job: a small product-category classifier whose failures are easy to see and to measure.

It reads the SageMaker container contract like ``train.py`` (the ``train`` channel, ``/opt/ml/checkpoints``,
hyperparameters as ``--key value``) and differs where lab 08 needs it to:

- the model is small and plain torch (hashed words into an ``EmbeddingBag``, then an MLP), so a launch starts fast;
- each step averages the gradients with one explicit all-reduce, timed on its own, and every rank logs its own
  ``[timing]`` line: compute (forward and backward) against waiting in the collective (a straggler shows here);
- ``--global_batch`` rows a step whatever the world size: each rank takes its slice of the step's global batch (the
  plan of ``sampling.py``) in micro-batches of ``--micro_batch`` and accumulates their gradients, so 1 rank and 2
  train the same thing;
- checkpoints are torch.distributed.checkpoint (DCP) directories, with the run's settings and each file's size and
  SHA-256 in ``meta.json``: a restarted job resumes at the checkpoint's step and data position on any world size the
  global batch maps to; a checkpoint of another model or other settings is refused with the differences named, and
  a damaged one (a shard missing, short or changed) with what is wrong;
- ``--fault`` (``faults.py``) makes one rank stop, skip a collective, straggle or crash, for the drills;
- the optimizer is AdamW written out (:class:`AdamW`, torch.optim.AdamW's update): torch.optim imports torch._dynamo
  the first time an optimizer is built or steps, which costs each rank of this small job about as much start-up time
  as importing torch itself, and every drill starts ranks (a restart starts them twice).

    torchrun --nproc_per_node 2 train_elastic.py --train ../../data/catalog/train --steps 24 --checkpoint_every 12
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import time
import zlib
from datetime import timedelta

import torch
import torch.distributed as dist

import faults
import options
from catalog_data import read_channel, read_labels
from container import run
from ranks import Dist, say
from sampling import GlobalBatchPlan

META = "meta.json"  # a checkpoint's settings and position, written last: a checkpoint without it is incomplete
STEP_DIR = re.compile(r"^step-(\d+)$")
# settings that make a run what it is: a checkpoint resumes only into a run with the same ones (world size excepted)
FINGERPRINT = ("global_batch", "micro_batch", "steps", "lr", "buckets", "dim", "hidden", "seed", "subset")


def parse_args(argv=None):
    return options.parse_known(options.elastic_parser(description=__doc__.split("\n\n")[0]), argv)


def main(args) -> None:
    world = int(os.environ.get("WORLD_SIZE", "1"))
    for why in (faults.problem(args, world), accumulation_problem(args, world)):
        if why:
            raise SystemExit(why)  # before the process group: a bad switch fails the job at once, saying why
    d = Dist(args.backend, timeout=timedelta(seconds=args.dist_timeout_s))
    torch.manual_seed(args.seed)  # the same initial weights on every rank and at every world size
    if args.threads:
        torch.set_num_threads(args.threads)
    labels = read_labels(args.train)
    titles, targets = read_channel(args.train, labels, args.subset)
    rows = [hashed_words(t, args.buckets) for t in titles]
    plan = GlobalBatchPlan(len(rows), args.global_batch, d.world, d.rank, args.seed)
    if len(plan) == 0:
        raise SystemExit(f"{len(rows)} rows make no global batch of {args.global_batch}: lower --global_batch")
    model = Classifier(args.buckets, args.dim, args.hidden, len(labels))
    optimizer = AdamW(model, lr=args.lr)
    fault = faults.Fault(args, d.rank)
    accumulation = args.global_batch // (d.world * args.micro_batch)
    meta = {"labels": labels, "rows": len(rows), **{k: getattr(args, k) for k in FINGERPRINT}}
    start = resume(args, d, model, optimizer, meta, accumulation)
    d.print(
        f"[setup] world_size={d.world} backend={d.backend} params={sum(p.numel() for p in model.parameters())} "
        f"rows={len(rows)} global_batch={args.global_batch} micro_batch={args.micro_batch} "
        f"accumulation={accumulation} steps={args.steps} start_step={start}"
    )
    history, step = [], start
    while step < args.steps:
        step += 1
        epoch, batch = divmod(step - 1, len(plan))
        plan.set_epoch(epoch, start_batch=batch)
        global_rows = plan.global_batches()[batch]
        mine = next(iter(plan))  # this rank's slice of the step's global batch
        t0 = time.perf_counter()
        loss = torch.zeros(())
        for i in range(0, len(mine), args.micro_batch):  # gradient accumulation: the global batch, whatever the world
            micro = mine[i : i + args.micro_batch]
            part = model.loss([rows[j] for j in micro], torch.tensor([targets[j] for j in micro]))
            (part / accumulation).backward()
            loss += part.detach() / accumulation
        fault.slow_down(step)  # a straggler computes longer
        t1 = time.perf_counter()
        if fault.before_collective(step):  # skip_collective: this rank leaves the loop without the all-reduce
            break
        # the one collective of a step: every rank waits in it for the slowest
        loss_all, wait_s = average_gradients(model, loss, d)
        optimizer.step()
        optimizer.zero_grad()
        t2 = time.perf_counter()
        ms = lambda s: f"{1000 * s:.2f}"  # noqa: E731
        say(
            f"[timing] step={step} rank={d.rank} compute_ms={ms(t1 - t0)} wait_ms={ms(wait_s)} "
            f"update_ms={ms(t2 - t1 - wait_s)} step_ms={ms(t2 - t0)}"
        )  # every rank's own line, in one write (ranks.say)
        batch_id = zlib.crc32(",".join(map(str, global_rows)).encode())  # which rows: the data position, checkable
        d.print(f"[train] step={step} train_loss={loss_all:.6f} batch={batch_id} world_size={d.world}")
        history.append({"step": step, "train_loss": loss_all, "batch": batch_id})
        if args.checkpoint_every and step % args.checkpoint_every == 0 and step < args.steps:
            save(args, d, model, optimizer, {**meta, "step": step, "world_size": d.world})
    else:
        d.print(
            f"[final] steps={step} train_loss={history[-1]['train_loss'] if history else 0:.6f} world_size={d.world}"
        )
        if d.master:
            os.makedirs(args.output_data_dir, exist_ok=True)
            with open(os.path.join(args.output_data_dir, "metrics.json"), "w", encoding="utf-8") as f:
                json.dump({"history": history, "start_step": start, "world_size": d.world}, f, indent=1)
    d.exit(0)  # a barrier first: a rank that left the loop early (skip_collective) waits here for the others


def accumulation_problem(args, world: int) -> str | None:
    """Why ``world`` ranks cannot train ``--global_batch`` in micro-batches of ``--micro_batch``; None if they can."""
    if args.global_batch % (world * args.micro_batch):
        fits = [
            w
            for w in range(1, args.global_batch // args.micro_batch + 1)
            if args.global_batch % (w * args.micro_batch) == 0
        ]
        return (
            f"--global_batch {args.global_batch} cannot be split over {world} rank(s) in micro-batches of "
            f"{args.micro_batch}: it must divide by world size x micro_batch. World sizes that keep this global "
            f"batch: {', '.join(map(str, fits))} (or change --micro_batch)"
        )
    return None


def hashed_words(title: str, buckets: int) -> list[int]:
    """A title as the buckets of its lower-cased words (a stable hash: crc32), the model's input."""
    return [zlib.crc32(w.encode()) % buckets for w in title.lower().split()] or [0]


class Classifier(torch.nn.Module):
    """Mean of the title's word embeddings, then a two-layer MLP to the categories."""

    def __init__(self, buckets: int, dim: int, hidden: int, labels: int):
        super().__init__()
        self.embed = torch.nn.EmbeddingBag(buckets, dim, mode="mean")
        self.mlp = torch.nn.Sequential(
            torch.nn.Linear(dim, hidden), torch.nn.ReLU(), torch.nn.Linear(hidden, hidden), torch.nn.ReLU()
        )
        self.head = torch.nn.Linear(hidden, labels)

    def loss(self, rows: list[list[int]], targets: torch.Tensor) -> torch.Tensor:
        ids = torch.tensor([i for r in rows for i in r])
        offsets = torch.tensor([0, *torch.tensor([len(r) for r in rows[:-1]]).cumsum(0).tolist()])
        logits = self.head(self.mlp(self.embed(ids, offsets)))
        return torch.nn.functional.cross_entropy(logits, targets)


class AdamW:
    """torch.optim.AdamW's update (decoupled weight decay, bias-corrected moments; its defaults), written out: the
    same arithmetic in the same order as its single-tensor path, without torch.optim's import of torch._dynamo.
    Its state is plain tensors by parameter name, which a DCP checkpoint saves and loads in place."""

    def __init__(self, model: torch.nn.Module, lr: float, betas=(0.9, 0.999), eps: float = 1e-8, weight_decay=1e-2):
        self.params = dict(model.named_parameters())
        self.lr, self.betas, self.eps, self.weight_decay = lr, betas, eps, weight_decay
        self.steps = torch.zeros(())  # a tensor, so a checkpoint load restores it in place
        self.moments = {
            f"{name}.{m}": torch.zeros_like(p) for name, p in self.params.items() for m in ("exp_avg", "exp_avg_sq")
        }

    @torch.no_grad()
    def step(self) -> None:
        beta1, beta2 = self.betas
        self.steps += 1
        t = self.steps.item()
        for name, p in self.params.items():
            if p.grad is None:
                continue
            exp_avg, exp_avg_sq = self.moments[f"{name}.exp_avg"], self.moments[f"{name}.exp_avg_sq"]
            p.mul_(1 - self.lr * self.weight_decay)
            exp_avg.lerp_(p.grad, 1 - beta1)
            exp_avg_sq.mul_(beta2).addcmul_(p.grad, p.grad, value=1 - beta2)
            denom = (exp_avg_sq.sqrt() / (1 - beta2**t) ** 0.5).add_(self.eps)
            p.addcdiv_(exp_avg, denom, value=-self.lr / (1 - beta1**t))

    def zero_grad(self) -> None:
        for p in self.params.values():
            p.grad = None

    def state_dict(self) -> dict:
        return {"steps": self.steps, **self.moments}


def average_gradients(model: torch.nn.Module, loss: torch.Tensor, d: Dist) -> tuple[float, float]:
    """Every rank's gradients (and its loss, in the same buffer) summed by one all-reduce and divided by the world
    size: the step's loss averaged over the global batch, and the seconds spent in the all-reduce."""
    params = [p for p in model.parameters() if p.grad is not None]
    flat = torch.cat([p.grad.reshape(-1) for p in params] + [loss.reshape(1)])
    t0 = time.perf_counter()
    if d.enabled:
        dist.all_reduce(flat)
    waited = time.perf_counter() - t0
    flat /= d.world
    offset = 0
    for p in params:
        p.grad.copy_(flat[offset : offset + p.numel()].view_as(p.grad))
        offset += p.numel()
    return flat[-1].item(), waited


# ---------------------------------------------------------------------------------------------------- checkpoints
def save(args, d: Dist, model, optimizer, meta: dict) -> None:
    """A DCP checkpoint of the model and optimizer (each tensor once, spread over the ranks' files), its settings and
    position in ``meta.json``; written under a temporary name and renamed when every rank has finished. A disk
    without room for it stops the job before anything is written; a write that fails anyway (the disk filled up
    meanwhile) removes the partial copy. Either way the checkpoints saved before it stay, and the job says so."""
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.api import CheckpointException  # a BaseException, not an Exception

    final = os.path.join(args.checkpoint_dir, f"step-{meta['step']:06d}")
    partial = os.path.join(args.checkpoint_dir, f".partial-step-{meta['step']:06d}")
    state = {"model": model.state_dict(), "optim": optimizer.state_dict()}
    os.makedirs(args.checkpoint_dir, exist_ok=True)
    needed = sum(t.numel() * t.element_size() for part in state.values() for t in part.values()) + (1 << 16)
    free = shutil.disk_usage(args.checkpoint_dir).free
    no_room = f"no room for it: it needs about {mb(needed)} and its disk has {mb(free)} free, so nothing was written"
    if problem := agreed(d, no_room if free < needed else ""):
        raise SystemExit(save_failed(args.checkpoint_dir, meta["step"], problem))
    failed = ""
    try:
        dcp.save(state, checkpoint_id=partial)
    except (Exception, CheckpointException) as err:  # noqa: BLE001 - DCP raises on every rank when one rank fails
        failed = short_error(err)
    if d.enabled:
        dist.barrier()  # every rank's shards written (or every rank failed)
    if d.master and not failed:  # meta.json last, whole or not at all: a checkpoint without it is incomplete
        try:
            written = os.path.join(partial, META + ".tmp")
            with open(written, "w", encoding="utf-8") as f:
                json.dump({**meta, "files": file_records(partial)}, f, indent=1)
                f.flush()
                os.fsync(f.fileno())
            os.replace(written, os.path.join(partial, META))
            shutil.rmtree(final, ignore_errors=True)
            os.replace(partial, final)
        except OSError as err:
            failed = short_error(err)
    if failed := agreed(d, failed):
        if d.master:
            shutil.rmtree(partial, ignore_errors=True)  # never trusted, and it holds the space the next try needs
        if d.enabled:
            dist.barrier()  # removed before any rank leaves: torchrun stops the others once one has
        full = "Errno 28" in failed or "No space left" in failed or shutil.disk_usage(args.checkpoint_dir).free < needed
        why = f"the disk filled up ({failed}): it needs about {mb(needed)}" if full else f"the write failed ({failed})"
        free = mb(shutil.disk_usage(args.checkpoint_dir).free)
        raise SystemExit(
            save_failed(args.checkpoint_dir, meta["step"], f"{why}; its partial copy is removed ({free} free)")
        )
    if d.master:
        say(f"[checkpoint] step={meta['step']} world_size={d.world} files={len(os.listdir(final))}")
    if d.enabled:
        dist.barrier()


def agreed(d: Dist, problem: str) -> str:
    """The first rank's problem ("" if no rank has one), the same on every rank: they stop together or not at all."""
    if not d.enabled:
        return problem
    seen: list = [None] * d.world
    dist.all_gather_object(seen, problem)
    return next((p for p in seen if p), "")


def save_failed(checkpoint_dir: str, step: int, what: str) -> str:
    """Why the checkpoint of ``step`` is not saved, what is kept, and what to do."""
    before = newest(checkpoint_dir)
    kept = (
        f"The checkpoints saved before it are intact: launched again, the job resumes from {os.path.basename(before)}"
        if before
        else "No checkpoint was saved before it: launched again, the job starts from step 0"
    )
    return (
        f"the checkpoint of step {step} was not saved in {checkpoint_dir}: {what}. {kept}. "
        f"Free space there, or give the job a checkpoint directory on a disk with room, then launch it again"
    )


def short_error(err: BaseException) -> str:
    """An exception in one line: the disk-full one where it is in there (DCP wraps each rank's failure)."""
    text = f"{type(err).__name__}: {err}"
    if "No space left on device" in text:
        return "OSError: [Errno 28] No space left on device"
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1][:200] if lines else type(err).__name__


def mb(size: int) -> str:
    return f"{size / 2**20:.1f} MB"


def file_records(path: str) -> dict:
    """Each file of a checkpoint folder but ``meta.json`` (the shards and DCP's ``.metadata``): its size and SHA-256."""
    records = {}
    for name in sorted(os.listdir(path)):
        if not name.startswith(META):
            with open(os.path.join(path, name), "rb") as f:
                records[name] = {"bytes": os.fstat(f.fileno()).st_size, "sha256": sha256_of(f)}
    return records


def sha256_of(f) -> str:
    """The SHA-256 of an open binary file, read in 1 MiB blocks (hashlib.file_digest is Python 3.11+)."""
    digest = hashlib.sha256()
    while block := f.read(1 << 20):
        digest.update(block)
    return digest.hexdigest()


def damage(path: str) -> tuple[dict | None, str]:
    """A checkpoint's settings, and what is wrong with its files ("" if nothing): meta.json unreadable, or a file
    it records missing, of another size or another SHA-256."""
    try:
        with open(os.path.join(path, META), encoding="utf-8") as f:
            saved = json.load(f)
        recorded = {name: (int(r["bytes"]), str(r["sha256"])) for name, r in saved["files"].items()}
    except (OSError, ValueError) as err:
        return None, f"its {META} is unreadable ({type(err).__name__}: {err}): cut short or damaged"
    except (KeyError, TypeError, AttributeError):
        return None, f"its {META} records no file sizes and checksums (an older or foreign checkpoint)"
    for name, (length, digest) in sorted(recorded.items()):
        full = os.path.join(path, name)
        if not os.path.isfile(full):
            return saved, f"{name} is missing"
        size = os.path.getsize(full)
        if size != length:
            return saved, f"{name} is {size} bytes, {length} when written: cut short or damaged"
        with open(full, "rb") as f:
            if sha256_of(f) != digest:
                return saved, f"{name} does not match its SHA-256 ({size} bytes, changed since written)"
    return saved, ""


def newest(checkpoint_dir: str) -> str | None:
    """The newest complete checkpoint (one with its ``meta.json``) in ``checkpoint_dir``, or None."""
    found = []
    if os.path.isdir(checkpoint_dir):
        for name in os.listdir(checkpoint_dir):
            m = STEP_DIR.match(name)
            if m and os.path.isfile(os.path.join(checkpoint_dir, name, META)):
                found.append((int(m.group(1)), os.path.join(checkpoint_dir, name)))
    return max(found)[1] if found else None


def earlier_advice(path: str) -> str:
    """Which earlier checkpoint beside ``path`` verifies, said as what to do."""
    parent, step = os.path.dirname(path), int(STEP_DIR.match(os.path.basename(path)).group(1))
    earlier = sorted(
        (int(m.group(1)), name) for name in os.listdir(parent) if (m := STEP_DIR.match(name)) and int(m.group(1)) < step
    )
    good = next((name for _, name in reversed(earlier) if not damage(os.path.join(parent, name))[1]), None)
    if good:
        return f"{good} beside it verifies: remove {os.path.basename(path)} to resume from it"
    return "No earlier checkpoint beside it verifies: start from a fresh checkpoint directory"


def differences(saved: dict, now: dict) -> list[str]:
    """The settings in which a checkpoint's run and this one differ (the world size may differ)."""
    keys = sorted((set(saved) | set(now)) - {"step", "world_size"})
    return [f"{k}: checkpoint {saved.get(k)!r}, this run {now.get(k)!r}" for k in keys if saved.get(k) != now.get(k)]


def resume(args, d: Dist, model, optimizer, meta: dict, accumulation: int) -> int:
    """Load the newest checkpoint, if there is one, on this world size; the step it reached (0 without one). A
    partial one (the job was killed while writing it) is removed first: never trusted, it would only hold space."""
    if d.local_rank == 0 and os.path.isdir(args.checkpoint_dir):
        for name in sorted(os.listdir(args.checkpoint_dir)):
            if name.startswith(".partial-step-"):
                d.print(f"[checkpoint] removing {name}: the job stopped while writing it")
                shutil.rmtree(os.path.join(args.checkpoint_dir, name), ignore_errors=True)
    if d.enabled:
        dist.barrier()
    path = newest(args.checkpoint_dir)
    if d.enabled:  # every rank must resume the same step, or their collectives would not match (a hang)
        seen: list = [None] * d.world
        dist.all_gather_object(seen, int(STEP_DIR.match(os.path.basename(path)).group(1)) if path else 0)
        if len(set(seen)) > 1:
            raise SystemExit(
                f"the ranks see different checkpoints in {args.checkpoint_dir} (newest step by rank: {seen}; 0: "
                "none). Each instance's /opt/ml/checkpoints holds only the files its own ranks wrote; a DCP "
                "checkpoint of several instances resumes only where every rank sees every file: a shared file "
                "system (FSx for Lustre), or a new job, into which SageMaker copies the whole checkpoint prefix"
            )
    if path is None:
        return 0
    import torch.distributed.checkpoint as dcp  # here, not above: a job that starts fresh does not pay its import

    saved, wrong = damage(path)
    if wrong or saved is None:
        raise SystemExit(
            f"the checkpoint {path} is damaged, and resuming it would train from garbage: {wrong}. "
            + earlier_advice(path)
        )
    changed = differences({k: v for k, v in saved.items() if k != "files"}, meta)
    if changed:
        raise SystemExit(
            f"the checkpoint in {path} is of another run, and resuming it would train something else: "
            + "; ".join(changed)
            + ". Use the same settings, or point --checkpoint_dir at a fresh directory"
        )
    state = {"model": model.state_dict(), "optim": optimizer.state_dict()}
    dcp.load(state, checkpoint_id=path)  # in place, into the tensors each rank holds, whatever world size wrote them
    model.load_state_dict(state["model"])
    d.print(
        f"[resume] step={saved['step']} from_world_size={saved['world_size']} world_size={d.world} "
        f"accumulation={accumulation} checkpoint={os.path.basename(path)}"
    )
    return saved["step"]


if __name__ == "__main__":
    run(main, parse_args)
