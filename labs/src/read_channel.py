"""Read a channel the way a data loader would, and say how fast: the input-mode lab's I/O-only job.

Standard library only, so it runs in any SageMaker image and in the local runner (its options are declared in
``options.py``); it reads only the container contract (``SM_CHANNEL_<NAME>``). ``--access sequential`` reads the
files in name order, each front to back; ``--access random`` reads a random ``--fraction`` of them in random order
(a shuffled data set of one object per record); ``--epochs`` passes over them, each opening every file again, as a
data set of files is read epoch after epoch. ``--compute_ms_per_mb`` adds a training step's work after each block
read, so a streaming input mode can overlap its reads with it: ``--compute_on accelerator`` waits that long, as a loop
waits for its GPU step with the CPU free; ``cpu`` spins this thread's CPU that long, as decoding would. Metric
lines::

    [read] files=10 bytes=1048576 seconds=0.2
    [final] files=40 bytes=4194304 read_seconds=0.81 mb_per_s=5.2 first_byte_s=0.01 compute_s=0.4
"""

from __future__ import annotations

import os
import random
import time

from options import read_channel_parser


def parse_args(argv=None):
    """The options declared in options.py (which the notebook side reads too); SageMaker adds hyperparameters of
    its own, so unknown ones are ignored."""
    args, _ = read_channel_parser(description=__doc__.split("\n\n")[0]).parse_known_args(argv)
    return args


def channel_files(root: str, pattern: str) -> list[str]:
    found = []
    for dirpath, _, names in os.walk(root, followlinks=True):
        found += [os.path.join(dirpath, n) for n in names if n.endswith(pattern)]
    return sorted(found)


def compute(seconds: float, on: str) -> None:
    """A step's work of ``seconds``: on the accelerator the loop waits for it; on the CPU this thread spins for that
    much CPU time (a busy machine stretches it, as it would real work)."""
    if on == "accelerator":
        time.sleep(seconds)
        return
    done = time.thread_time() + seconds
    while time.thread_time() < done:
        pass


def main(args) -> None:
    start = time.perf_counter()
    root = os.environ.get(f"SM_CHANNEL_{args.channel.upper()}", f"/opt/ml/input/data/{args.channel}")
    files = channel_files(root, args.pattern)
    if not files:
        raise SystemExit(f"{root}: no files{' ending in ' + args.pattern if args.pattern else ''} in this channel")
    if args.access == "random":
        files = random.Random(args.seed).sample(files, max(1, round(len(files) * args.fraction)))
    else:
        files = files[: max(1, round(len(files) * args.fraction))]
    listed = sum(os.path.getsize(f) for f in files)
    print(f"[setup] channel={args.channel} access={args.access} files={len(files)} bytes_listed={listed}", flush=True)
    every = args.log_every or max(1, len(files) * args.epochs // 10)  # about ten [read] lines, whatever the epochs
    block = args.block_kb << 10
    total, first_byte, work_s = 0, None, 0.0
    t0 = time.perf_counter()
    for i, path in enumerate(files * args.epochs, start=1):
        with open(path, "rb") as f:
            while chunk := f.read(block):
                first_byte = first_byte if first_byte is not None else time.perf_counter() - start
                total += len(chunk)
                cost = len(chunk) / 1e6 * args.compute_ms_per_mb / 1e3
                if cost:
                    compute(cost, args.compute_on)
                work_s += cost
        if i % every == 0 or i == len(files) * args.epochs:
            print(f"[read] files={i} bytes={total} seconds={time.perf_counter() - t0:.4f}", flush=True)
    seconds = time.perf_counter() - t0
    print(
        f"[final] files={len(files)} epochs={args.epochs} bytes={total} read_seconds={seconds:.4f} "
        f"mb_per_s={total / 1e6 / seconds if seconds else 0:.4f} first_byte_s={first_byte or 0:.4f} "
        f"compute_s={work_s:.4f}",
        flush=True,
    )


if __name__ == "__main__":
    main(parse_args())
