"""Single-device speed: the lab's training loop against HF Trainer, same model, same batches, interleaved trials.

    python benchmarks/single_gpu.py --modes random --out random.json  # a GPU: base size, a few minutes
    python benchmarks/single_gpu.py --modes titles --out titles.json  # the first compile of each width is slow
    python benchmarks/single_gpu.py --device cpu --model_size tiny --steps 4 --warmup_steps 1 \\
        --batch_sizes 8 --title_rows 256 --title_batch 32 --compile false --trials 2   # a smoke check on a laptop

Modes:
  random  random tokens at --seq (128), each of --batch_sizes (64, 256): the shape of the workshop's H100 goals
          (DistilBERT-base, 64 labels). Batches carry no padding, so they carry no attention mask either.
  titles  the product-title catalogue with its real lengths, three layouts: every batch padded to --seq,
          dynamic padding (to the batch's longest title, rounded up to --pad_multiple), and length buckets.
          Trained for --epochs; the first epoch is warm-up (compiles every width), the rest is timed; then
          validated, so a speed-up is shown to keep accuracy.

Both trainers get the same model (``train.build_model``, same seed: the same weights), the same optimizer and
schedule objects (``fastpath.make_optimizer`` with the fused kernel on a GPU, ``fastpath.make_schedule``), and the
same DataLoader (one batch plan, one collator). HF Trainer runs with its fast settings: bf16, ``torch_compile``,
``average_tokens_across_devices=False``; ours with bf16 autocast, fused AdamW, in-place compile with static widths
(``fastpath.compile_model``). What differs is the training loop around them: that is what the ratio measures; at
small batches on a GPU ours also replays CUDA graphs (``--compile_mode auto``), which Trainer's loop does not.

Every run is repeated ``--trials`` times, interleaved: each trial runs every workload and trainer once, the trainers
in turn (A B, then B A), so a machine that slows down for a while slows both sides alike. A row's figures are its
median trial's, with the spread of all (``samples_per_sec_trials``); a ratio (ours over HF Trainer, a layout over
padding) is the median of the ratios within each trial, with their range (``speedup_vs_hf_range``...).

Throughput counts only the timed steps (after warm-up), between two device synchronisations. MFU uses the training
script's FLOP count (at the padded width) and measured peak table (``MEASURED_PEAK_TFLOPS``); it is left out off a
GPU. Prints a table; ``--out`` writes the JSON.
"""

from __future__ import annotations

import argparse
import gc
import json
import math
import os
import platform
import statistics
import sys
import tempfile
import time
from contextlib import nullcontext
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "labs" / "src"))
import fastpath  # noqa: E402  (the container's code: the same construction train.py uses)
import options  # noqa: E402
import train  # noqa: E402
from catalog_data import PadCollator, TokenizedTitles, load_tokenizer, read_channel, read_labels  # noqa: E402
from sampling import GlobalBatchPlan  # noqa: E402

# the largest batch --compile_mode auto gives CUDA graphs: smaller steps are launch-bound, larger ones gained nothing
# (docs/gpu.md has the measurement)
CUDA_GRAPHS_UP_TO = 64
# the goals, checked on an H100 only: (what, mode, layout, batch, trainer, figure, at least)
GOALS = [
    ("samples/s, batch 256, seq 128", "random", "seq", 256, "ours", "samples_per_sec", 11_000),
    ("MFU, batch 256, seq 128", "random", "seq", 256, "ours", "mfu", 0.47),
    ("x HF Trainer, batch 256", "random", "seq", 256, "ours", "speedup_vs_hf", 1.6),
    ("samples/s, batch 64, seq 128", "random", "seq", 64, "ours", "samples_per_sec", 6_000),
    ("bucketing x pad-to-128 on real titles", "titles", "bucketed", None, "ours", "speedup_vs_padded", 3.0),
]


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--device", choices=["auto", "cuda", "cpu"], default="auto")
    p.add_argument("--model_size", choices=sorted(options.CLASSIFIER_MODEL_SIZES), default="base")
    p.add_argument("--modes", default="random,titles", help="comma list: random, titles")
    p.add_argument("--trainers", default="hf,ours", help="comma list: hf, ours")
    p.add_argument("--precision", choices=["auto", "bf16", "fp32"], default="auto", help="auto: bf16 on a GPU")
    p.add_argument("--compile", choices=["auto", "true", "false"], default="auto", help="auto: on a GPU only")
    p.add_argument(
        "--compile_mode",
        choices=["auto", *fastpath.COMPILE_MODES],
        default="auto",
        help=f"ours only: reduce-overhead adds CUDA graphs; auto: they on a GPU up to batch {CUDA_GRAPHS_UP_TO}",
    )
    p.add_argument("--seq", type=int, default=128, help="random mode's width, and the titles' max/pad length")
    p.add_argument("--batch_sizes", default="64,256", help="random mode: comma list")
    p.add_argument("--labels", type=int, default=64, help="random mode's number of classes")
    p.add_argument("--vocab", type=int, default=30522, help="random mode's vocabulary (distilbert-base's)")
    p.add_argument("--warmup_steps", type=int, default=15, help="random mode: untimed steps (compiling)")
    p.add_argument("--steps", type=int, default=60, help="random mode: timed steps")
    p.add_argument("--data", default=str(REPO / "data" / "catalog"), help="a catalogue with train/ and validation/")
    p.add_argument("--title_rows", type=int, default=0, help="titles mode: first N training rows (0: all)")
    p.add_argument("--val_rows", type=int, default=0, help="titles mode: first N validation rows (0: all)")
    p.add_argument("--title_batch", type=int, default=256)
    p.add_argument("--epochs", type=int, default=3, help="titles mode: epochs; the first is warm-up")
    p.add_argument("--layouts", default="padded,dynamic,bucketed", help="titles mode: comma list")
    p.add_argument("--pad_multiple", type=int, default=16, help="titles mode: dynamic widths round up to this")
    p.add_argument("--lr", type=float, default=5e-5)
    p.add_argument("--dropout", type=float, default=0.1, help="0: both trainers' losses match step for step")
    p.add_argument("--num_workers", type=int, default=-1, help="DataLoader workers (-1: 2 on a GPU, 0 on a CPU)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--trials", type=int, default=3, help="interleaved repetitions of every run (ratios: paired)")
    p.add_argument("--out", default="", help="write the JSON here too")
    a = p.parse_args(argv)
    a.device = torch.device(("cuda" if torch.cuda.is_available() else "cpu") if a.device == "auto" else a.device)
    if a.device.type == "cuda" and not torch.cuda.is_available():
        raise SystemExit("--device cuda, but torch sees no GPU here: use --device cpu (with --model_size tiny)")
    a.modes, a.trainers, a.layouts = (x.split(",") for x in (a.modes, a.trainers, a.layouts))
    for name, given, known in (
        ("modes", a.modes, {"random", "titles"}),
        ("trainers", a.trainers, {"hf", "ours"}),
        ("layouts", a.layouts, {"padded", "dynamic", "bucketed"}),
    ):
        if not set(given) <= known:
            raise SystemExit(f"--{name} {','.join(given)}: choose from {', '.join(sorted(known))}")
    if not all(b.strip().isdecimal() and int(b) > 0 for b in a.batch_sizes.split(",")):
        raise SystemExit(f"--batch_sizes {a.batch_sizes}: give positive whole numbers, comma-separated (e.g. 64,256)")
    a.batch_sizes = [int(b) for b in a.batch_sizes.split(",")]
    if a.warmup_steps < 1 or a.steps < 1:
        raise SystemExit("--warmup_steps and --steps must be >= 1: the clock starts after the warm-up steps")
    # refused before the catalogue is read and tokenised, or a model built: a bad value costs nothing
    titles = [("title_batch", 1), ("pad_multiple", 1), ("epochs", 2)] if "titles" in a.modes else []
    least = [("seq", 1), ("trials", 1), *titles]
    for name, low in least:
        if getattr(a, name) < low:
            why = " (titles mode: the first epoch is warm-up, untimed)" if name == "epochs" else ""
            raise SystemExit(f"--{name} {getattr(a, name)}: must be >= {low}{why}")
    a.precision = ("bf16" if a.device.type == "cuda" else "fp32") if a.precision == "auto" else a.precision
    a.compile = a.device.type == "cuda" if a.compile == "auto" else a.compile == "true"
    a.num_workers = (2 if a.device.type == "cuda" else 0) if a.num_workers < 0 else a.num_workers
    if "titles" in a.modes and not (Path(a.data) / "train" / "labels.json").is_file():
        raise SystemExit(
            f"--data {a.data}: no catalogue there (train/labels.json). Build one with "
            f"`python -m catalog_generator build --rows 30000 --out {a.data}`"
        )
    return a


class OneDevice:
    """What ``train.evaluate`` needs of ``ranks.Dist`` for one process on a chosen device."""

    def __init__(self, device: torch.device):
        self.device, self.rank, self.world = device, 0, 1

    def all_reduce(self, tensor):
        return tensor


class RandomTokens(torch.utils.data.Dataset):
    """Fixed random token ids (never the pad id) and labels: every row is exactly ``seq`` long."""

    def __init__(self, rows: int, seq: int, vocab: int, labels: int, seed: int):
        g = torch.Generator().manual_seed(seed)
        self.ids = torch.randint(1, vocab, (rows, seq), generator=g)
        self.targets = torch.randint(0, labels, (rows,), generator=g)

    def __len__(self):
        return len(self.ids)

    def __getitem__(self, i):
        return self.ids[i], self.targets[i]


def stack_unpadded(batch):
    """Rows of one width need no padding, so no attention mask: SDPA may then pick its fastest (flash) kernel."""
    return {"input_ids": torch.stack([ids for ids, _ in batch]), "labels": torch.stack([t for _, t in batch])}


class Workload:
    """One comparison: a dataset, its batch plan and collator, the model's shape, and how long to run."""

    def __init__(
        self,
        mode,
        layout,
        batch,
        dataset,
        collate,
        plan,
        vocab,
        num_labels,
        pad_id,
        warmup,
        total,
        val_set=None,
        val_collate=None,
    ):
        self.mode, self.layout, self.batch = mode, layout, batch
        self.dataset, self.collate, self.plan = dataset, collate, plan
        self.vocab, self.num_labels, self.pad_id, self.warmup, self.total = vocab, num_labels, pad_id, warmup, total
        self.val_set, self.val_collate = val_set, val_collate

    def loader(self, a):
        """A fresh loader over the same plan: both trainers see the same batches in the same order."""
        self.plan.set_epoch(0)
        return torch.utils.data.DataLoader(
            self.dataset,
            batch_sampler=EpochCycling(self.plan, self.total),
            collate_fn=self.collate,
            num_workers=a.num_workers,
            pin_memory=a.device.type == "cuda",
        )

    def key(self):
        return (self.mode, self.layout, self.batch)


class EpochCycling(torch.utils.data.Sampler):
    """The plan's batches, epoch after epoch, ``total`` of them in all: one loader pass is the whole run."""

    def __init__(self, plan: GlobalBatchPlan, total: int):
        self.plan, self.total = plan, total

    def __len__(self):
        return self.total

    def __iter__(self):
        done, epoch = 0, 0
        while done < self.total:
            self.plan.set_epoch(epoch)
            for batch in self.plan:
                if done == self.total:
                    return
                yield batch
                done += 1
            epoch += 1


def workloads(a) -> list[Workload]:
    out = []
    if "random" in a.modes:
        for b in a.batch_sizes:
            total = a.warmup_steps + a.steps
            data = RandomTokens(b * 8, a.seq, a.vocab, a.labels, a.seed)  # 8 distinct batches, cycled
            out.append(
                Workload(
                    "random",
                    "seq",
                    b,
                    data,
                    stack_unpadded,
                    GlobalBatchPlan(len(data), b, seed=a.seed),
                    a.vocab,
                    a.labels,
                    0,
                    a.warmup_steps,
                    total,
                )
            )
    if "titles" in a.modes:
        labels = read_labels(f"{a.data}/train")
        tok = load_tokenizer(f"{a.data}/train/tokenizer.json")
        train_set = TokenizedTitles(*read_channel(f"{a.data}/train", labels, a.title_rows), tok, a.seq)
        val_set = TokenizedTitles(*read_channel(f"{a.data}/validation", labels, a.val_rows), tok, a.seq)
        bucketing = argparse.Namespace(bucket_by_length=True, pad_multiple=a.pad_multiple)
        lengths = fastpath.bucket_keys(train_set, bucketing)
        per_epoch = len(train_set) // a.title_batch
        if per_epoch == 0:
            raise SystemExit(
                f"titles mode needs at least one batch of {a.title_batch} ({len(train_set)} rows): "
                f"lower --title_batch or raise --title_rows"
            )
        dynamic = PadCollator(tok.pad_token_id, multiple=a.pad_multiple)
        layouts = {
            "padded": (PadCollator(tok.pad_token_id, pad_to=a.seq), None),
            "dynamic": (dynamic, None),
            "bucketed": (dynamic, lengths),
        }
        for name in a.layouts:
            collate, by_length = layouts[name]
            plan = GlobalBatchPlan(len(train_set), a.title_batch, seed=a.seed, lengths=by_length)
            out.append(
                Workload(
                    "titles",
                    name,
                    a.title_batch,
                    train_set,
                    collate,
                    plan,
                    len(tok),
                    len(labels),
                    tok.pad_token_id,
                    per_epoch,
                    per_epoch * a.epochs,
                    val_set,
                    collate,
                )
            )
    return out


def script_args(a, w: Workload):
    """train.py's own arguments for this workload: the model and optimizer are built from them."""
    return train.parse_args(
        [
            "--model_size",
            a.model_size,
            "--max_length",
            str(a.seq),
            "--dropout",
            str(a.dropout),
            "--lr",
            str(a.lr),
            "--fused_adamw",
            str(a.device.type == "cuda"),
            "--compile",
            str(a.compile),
            "--compile_mode",
            compile_mode(a, w),
            "--pad_multiple",
            str(1 if w.mode == "random" else a.pad_multiple),
            "--pad_to",
            str(a.seq if w.layout == "padded" else 0),
            "--seed",
            str(a.seed),
        ]
    )


def compile_mode(a, w: Workload) -> str:
    """--compile_mode, with auto resolved for this workload: CUDA graphs where a step is short enough for kernel
    launches to dominate (a compiled GPU run up to :data:`CUDA_GRAPHS_UP_TO` rows), else inductor's default."""
    if a.compile_mode != "auto":
        return a.compile_mode
    small = a.device.type == "cuda" and a.compile and w.batch <= CUDA_GRAPHS_UP_TO
    return "reduce-overhead" if small else "default"


def build(a, w: Workload):
    args = script_args(a, w)
    torch.manual_seed(a.seed)  # both trainers start from the same weights
    model = train.build_model(args, w.vocab, w.num_labels, w.pad_id).to(a.device)
    optimizer = fastpath.make_optimizer(model, args)
    return args, model, optimizer, fastpath.make_schedule(optimizer, args, w.total)


class Clock:
    """Wall time of the timed steps, between two device synchronisations."""

    def __init__(self, device: torch.device):
        self.sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
        self.start = self.seconds = 0.0

    def begin(self):
        self.sync()
        self.start = time.perf_counter()

    def end(self):
        self.sync()
        self.seconds = time.perf_counter() - self.start


def batch_tokens(batch) -> tuple[int, int]:
    """(real tokens, padded tokens) of one batch."""
    ids = batch["input_ids"]
    real = int(batch["attention_mask"].sum()) if "attention_mask" in batch else ids.numel()
    return real, ids.numel()


def run_ours(a, w: Workload, autocast) -> dict:
    args, model, optimizer, schedule = build(a, w)
    new_step = fastpath.compile_model(model, args)
    clock, losses = Clock(a.device), []
    model.train()
    for step, batch in enumerate(w.loader(a)):
        if step == w.warmup:
            clock.begin()
        batch = {k: v.to(a.device, non_blocking=True) for k, v in batch.items()}
        new_step()
        with autocast:  # the same lines as train.py's loop (bf16/fp32: no loss scaling)
            loss = model(**batch).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        schedule.step()
        losses.append(loss.detach().float().clone())
    clock.end()
    row = finish(a, w, "ours", model, clock.seconds, torch.stack(losses).tolist(), autocast)
    return {**row, "compile_mode": args.compile_mode if args.compile else None}


def run_hf(a, w: Workload, autocast) -> dict:
    from transformers import Trainer, TrainerCallback, TrainingArguments

    args, model, optimizer, schedule = build(a, w)
    clock, losses, loader = Clock(a.device), [], w.loader(a)

    class Timer(TrainerCallback):
        def on_step_end(self, targs, state, control, **kw):
            if state.global_step == w.warmup:
                clock.begin()
            if state.global_step == w.total:  # before train()'s own wrap-up, which is not training
                clock.end()

        def on_log(self, targs, state, control, logs=None, **kw):
            if logs and "loss" in logs:
                losses.append(logs["loss"])

    class SameBatches(Trainer):
        def get_train_dataloader(self):
            return self.accelerator.prepare(loader)

    with tempfile.TemporaryDirectory() as out:
        targs = TrainingArguments(
            output_dir=out,
            per_device_train_batch_size=w.batch,
            max_steps=w.total,
            bf16=a.precision == "bf16",
            torch_compile=a.compile,
            max_grad_norm=1.0,
            logging_steps=w.total,
            report_to="none",
            save_strategy="no",
            eval_strategy="no",
            average_tokens_across_devices=False,
            disable_tqdm=True,
            use_cpu=a.device.type == "cpu",
            dataloader_pin_memory=a.device.type == "cuda",
            seed=a.seed,
        )
        trainer = SameBatches(
            model=model, args=targs, train_dataset=w.dataset, optimizers=(optimizer, schedule), callbacks=[Timer()]
        )
        trainer.train()
    return finish(a, w, "hf", trainer.model, clock.seconds, losses, autocast, mean_only=True)


def finish(a, w: Workload, trainer: str, model, seconds: float, losses: list, autocast, mean_only=False) -> dict:
    """Throughput over the timed steps (re-reading their batches from the plan: no counting inside the loop)."""
    timed = w.total - w.warmup
    real = padded = flops = 0
    flops_of = train.FlopCounter(model)
    for step, batch in enumerate(w.loader(a)):
        if step >= w.warmup:
            r, p = batch_tokens(batch)
            real, padded, flops = real + r, padded + p, flops + w.batch * flops_of(batch["input_ids"].shape[1])
    rate = timed * w.batch / seconds if seconds else float("nan")
    peak = (
        next((v for k, v in train.MEASURED_PEAK_TFLOPS.items() if k in torch.cuda.get_device_name()), 0.0)
        if a.device.type == "cuda"
        else 0.0
    )
    row = {
        "mode": w.mode,
        "layout": w.layout,
        "batch": w.batch,
        "trainer": trainer,
        "timed_steps": timed,
        "seconds": seconds,
        "samples_per_sec": rate,
        "tokens_per_sec": real / seconds if seconds else float("nan"),
        "padded_tokens_per_sec": padded / seconds if seconds else float("nan"),
        "mfu": flops / seconds / (peak * 1e12) if peak and seconds else None,
        "peak_mem_gb": torch.cuda.max_memory_allocated() / 2**30 if a.device.type == "cuda" else None,
        "mean_loss": sum(losses) / len(losses) if losses else float("nan"),
    }
    if not mean_only:
        row["first_loss"] = losses[0]
    if w.val_set is not None:
        with torch.compiler.set_stance("force_eager"):  # as train.py: evaluation is not worth compiling
            row.update(
                train.evaluate(
                    model, w.val_set, w.val_collate, OneDevice(a.device), autocast, 2 * w.batch, w.num_labels
                )
            )
    return row


def reset(device: torch.device) -> None:
    """Each run compiles and allocates from scratch: no graph or cached block carries over to the next."""
    torch._dynamo.reset()
    gc.collect()
    if device.type == "cuda":
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()


def ratios(rows: list[dict]) -> None:
    """Ours over HF for each workload; each layout over padding-to-seq for the same trainer: the median of the
    ratios within each trial (the two runs of a pair ran side by side in time), and their range."""
    by = {(r["mode"], r["layout"], r["batch"], r["trainer"]): r for r in rows}
    for r in rows:
        hf = by.get((r["mode"], r["layout"], r["batch"], "hf"))
        if r["trainer"] == "ours" and hf:
            paired(r, hf, "speedup_vs_hf")
        padded = by.get((r["mode"], "padded", r["batch"], r["trainer"]))
        if r["mode"] == "titles" and padded:
            paired(r, padded, "speedup_vs_padded")


def paired(row: dict, other: dict, name: str) -> None:
    """``row[name]``: the median over trials of row's throughput over other's in the same trial; and its range."""
    each = [a / b for a, b in zip(row["samples_per_sec_trials"], other["samples_per_sec_trials"]) if b]
    row[name] = statistics.median(each) if each else float("nan")
    row[f"{name}_range"] = [min(each), max(each)] if each else None


def median_trial(trials: list[dict]) -> dict:
    """The row of the median trial by throughput (its other figures belong to the same run), with every trial's
    throughput beside it."""
    ordered = sorted(trials, key=lambda r: r["samples_per_sec"])
    row = dict(ordered[(len(ordered) - 1) // 2])
    row["samples_per_sec_trials"] = [r["samples_per_sec"] for r in trials]
    row["trials"] = len(trials)
    return row


def goals(a, rows: list[dict]) -> list[dict]:
    on_h100 = a.device.type == "cuda" and "H100" in torch.cuda.get_device_name()
    out = []
    for what, mode, layout, batch, trainer, figure, least in GOALS:
        found = [
            r.get(figure)
            for r in rows
            if (r["mode"], r["layout"], r["trainer"]) == (mode, layout, trainer)
            and batch in (None, r["batch"])
            and r.get(figure) is not None
        ]
        value = found[0] if found else None
        out.append(
            {
                "goal": what,
                "at_least": least,
                "measured": value,
                "met": (value >= least) if on_h100 and value is not None else None,
            }
        )
    return out


def no_nan(value):
    """JSON has no NaN: a figure that could not be measured is null."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: no_nan(v) for k, v in value.items()}
    return [no_nan(v) for v in value] if isinstance(value, list) else value


def table(rows: list[dict]) -> str:
    cols = [
        "mode",
        "layout",
        "batch",
        "trainer",
        "samples_per_sec",
        "tokens_per_sec",
        "mfu",
        "peak_mem_gb",
        "mean_loss",
        "val_accuracy",
        "speedup_vs_hf",
        "speedup_vs_padded",
    ]
    cols = [c for c in cols if any(r.get(c) is not None for r in rows)]
    fmt = lambda v: (
        "-"
        if v is None
        else (f"{v:,.3f}" if isinstance(v, float) and abs(v) < 10 else f"{v:,.0f}" if isinstance(v, float) else str(v))
    )
    cells = [cols] + [[fmt(r.get(c)) for c in cols] for r in rows]
    width = [max(len(row[i]) for row in cells) for i in range(len(cols))]
    return "\n".join("  ".join(v.rjust(w) for v, w in zip(row, width)) for row in cells)


def summarize(a, runs: dict[tuple, list[dict]], complete: bool) -> dict:
    """The report of the runs so far: one row per workload and trainer (its median trial), ratios and goals."""
    rows = [median_trial(trials) for trials in runs.values()]
    ratios(rows)
    cpu = f"cpu ({platform.processor() or platform.machine()})"
    return {
        "device": torch.cuda.get_device_name() if a.device.type == "cuda" else cpu,
        "torch": torch.__version__,
        "transformers": __import__("transformers").__version__,
        "model_size": a.model_size,
        "precision": a.precision,
        "compile": a.compile,
        "compile_mode": a.compile_mode,
        "complete": complete,  # False: a report written after each run, in case the benchmark is stopped
        "rows": rows,
        "goals": goals(a, rows),
    }


def main(argv=None) -> dict:
    a = parse_args(argv)
    amp = {"bf16": torch.bfloat16}.get(a.precision)
    autocast = torch.autocast(a.device.type, dtype=amp) if amp else nullcontext()
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    runs: dict[tuple, list[dict]] = {}
    chosen = workloads(a)
    for trial in range(a.trials):  # interleaved: every workload and trainer once per trial, the trainers in turn
        order = a.trainers if trial % 2 == 0 else a.trainers[::-1]
        for w in chosen:
            for who in order:
                reset(a.device)
                row = (run_hf if who == "hf" else run_ours)(a, w, autocast)
                runs.setdefault((w.mode, w.layout, w.batch, who), []).append(row)
                print(
                    f"[bench] trial {trial + 1}/{a.trials} {w.mode}/{w.layout} batch={w.batch} {who}: "
                    f"{row['samples_per_sec']:,.1f} samples/s",
                    flush=True,
                )
                if a.out:  # a benchmark stopped by a time limit still leaves the runs it finished
                    Path(a.out).write_text(json.dumps(no_nan(summarize(a, runs, complete=False)), indent=1))
    result = summarize(a, runs, complete=True)
    print(table(result["rows"]))
    for g in result["goals"]:
        state = {True: "met", False: "NOT met", None: "not checked (goals are for an H100)"}[g["met"]]
        measured = "-" if g["measured"] is None else f"{g['measured']:,.3g}"
        print(f"goal: {g['goal']} >= {g['at_least']:,}: measured {measured}, {state}")
    text = json.dumps(no_nan(result), indent=1)
    print(text)
    if a.out:
        Path(a.out).write_text(text)
    return result


if __name__ == "__main__":
    main()
