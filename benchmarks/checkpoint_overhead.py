"""What checkpoints cost: save and load time against training step time, for the tiny and base model sizes.

Builds the training script's own model, optimizer, schedule and checkpointer in one process, times a few training
steps, then a few full saves (serialise, SHA-256, fsync, rename, prune) and verified loads, and prints the overhead
as a share of training time for a few checkpoint intervals. Both sizes are measured side by side in one run, so the
ratios hold even on a noisy machine::

    .venv/bin/python benchmarks/checkpoint_overhead.py                  # tiny and base, batch 16, seq 64
    .venv/bin/python benchmarks/checkpoint_overhead.py --sizes tiny --repeats 5
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

SRC = Path(__file__).resolve().parent.parent / "labs" / "src"
sys.path.insert(0, str(SRC))
import options  # noqa: E402  (the container's code: train.py's options and model, a Dist for one process)
import train  # noqa: E402
from checkpointing import Checkpointer  # noqa: E402
from ranks import Dist  # noqa: E402

VOCAB, LABELS = 8000, 44


class History:
    def __init__(self):
        self.history = []


def build(size: str, args):
    hp = train.parse_args(
        ["--model_size", size, "--dropout", "0.1", "--checkpoint_every", "1", "--max_length", str(args.seq)]
    )  # positions for any --seq
    model = train.build_model(hp, VOCAB, LABELS, pad_id=0)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: 1.0)
    scaler = torch.amp.GradScaler("cpu", enabled=False)
    return hp, model, optimizer, schedule, scaler


def step_seconds(model, optimizer, schedule, batch: int, seq: int, steps: int) -> float:
    ids = torch.randint(1, VOCAB, (batch, seq))
    labels = torch.randint(0, LABELS, (batch,))
    times = []
    for _ in range(steps + 1):  # the first step allocates: left out
        t0 = time.perf_counter()
        model(input_ids=ids, attention_mask=torch.ones_like(ids), labels=labels).loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        schedule.step()
        times.append(time.perf_counter() - t0)
    return statistics.median(times[1:])


def measure(size: str, args) -> dict:
    hp, model, optimizer, schedule, scaler = build(size, args)
    step_s = step_seconds(model, optimizer, schedule, args.batch, args.seq, args.steps)  # optimizer state exists now
    d = Dist("auto")
    progress = train.Progress()  # the loop's counters, saved in every rank's file as train.py saves them
    with tempfile.TemporaryDirectory(dir=args.tmp) as tmp:
        ckpt = Checkpointer(
            tmp,
            d,
            every=1,
            keep=2,
            fingerprint={"model_size": size},
            allow_changes=set(),
            model=model,
            optimizer=optimizer,
            schedule=schedule,
            scaler=scaler,
            metrics=History(),
            progress=progress,
        )
        saves, loads = [], []
        for i in range(args.repeats):
            progress.step = i + 1
            t0 = time.perf_counter()
            ckpt.save()
            saves.append(time.perf_counter() - t0)
        megabytes = sum(f.stat().st_size for f in max(Path(tmp).glob("step-*")).iterdir()) / 2**20
        for _ in range(args.repeats):
            t0 = time.perf_counter()
            ckpt.resume()
            loads.append(time.perf_counter() - t0)
    return {
        "size": size,
        "params": sum(p.numel() for p in model.parameters()),
        "mb": megabytes,
        "step_s": step_s,
        "save_s": statistics.median(saves),
        "load_s": statistics.median(loads),
    }


class Quiet:
    """The checkpointer's log lines would drown the table."""

    def __enter__(self):
        self.stdout, sys.stdout = sys.stdout, open("/dev/null", "w")

    def __exit__(self, *exc):
        sys.stdout.close()
        sys.stdout = self.stdout


def refuse_bad(p: argparse.ArgumentParser, args) -> None:
    """Fail at once on what would otherwise fail only after the models are built and trained."""
    counts = {
        "batch": [args.batch],
        "seq": [args.seq],
        "steps": [args.steps],
        "repeats": [args.repeats],
        "every": args.every,
        "threads": [args.threads],
    }
    for name, values in counts.items():
        if min(values) < 1:
            p.error(f"--{name} {' '.join(map(str, values))}: must be at least 1")
    if args.tmp is not None and not (os.path.isdir(args.tmp) and os.access(args.tmp, os.W_OK | os.X_OK)):
        p.error(f"--tmp {args.tmp}: not a writable directory; create it (mkdir -p {args.tmp}) or leave --tmp out")


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sizes", nargs="+", default=["tiny", "base"], choices=sorted(options.CLASSIFIER_MODEL_SIZES))
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--seq", type=int, default=64)
    p.add_argument("--steps", type=int, default=3, help="timed training steps per size")
    p.add_argument("--repeats", type=int, default=3, help="timed saves and loads per size")
    p.add_argument("--every", type=int, nargs="+", default=[50, 200, 1000], help="checkpoint intervals (steps)")
    p.add_argument("--threads", type=int, default=1, help="intra-op threads (1: steady on a shared machine)")
    p.add_argument(
        "--tmp", default=None, help="where to write (default: the system temp dir; use the disk you will checkpoint to)"
    )
    args = p.parse_args(argv)
    refuse_bad(p, args)
    torch.manual_seed(0)
    torch.set_num_threads(args.threads)
    print(
        f"torch {torch.__version__}, {torch.get_num_threads()} threads, batch {args.batch} x seq {args.seq}, "
        f"median of {args.repeats} saves/loads"
    )
    rows = []
    for size in args.sizes:
        with Quiet():
            rows.append(measure(size, args))
    head = f"{'size':<6} {'params':>11} {'ckpt MB':>8} {'step s':>8} {'save s':>8} {'load s':>8} {'save/step':>9}"
    head += "".join(f" {'every ' + str(n):>11}" for n in args.every)
    print(head)
    for r in rows:
        line = (
            f"{r['size']:<6} {r['params']:>11,} {r['mb']:>8.1f} {r['step_s']:>8.3f} {r['save_s']:>8.3f} "
            f"{r['load_s']:>8.3f} {r['save_s'] / r['step_s']:>9.2f}"
        )
        line += "".join(f" {r['save_s'] / (r['save_s'] + n * r['step_s']):>11.2%}" for n in args.every)
        print(line)
    print("every N: checkpoint time as a share of training time when saving every N steps")


if __name__ == "__main__":
    main()
