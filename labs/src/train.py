"""Train a DistilBERT-style product-category classifier: the one training script every lab launches.

It reads only the SageMaker training-container contract (SM_* variables, /opt/ml paths, hyperparameters as
``--key value``), so it runs unchanged in a SageMaker container, in the workshop's local runner, and by hand::

    python train.py --train ../../data/catalog/train --validation ../../data/catalog/validation --model_size tiny
    torchrun --nproc_per_node 2 train.py ...      # DDP: detected from torchrun's RANK, nothing else to set

Metric lines are ``key=value`` pairs (``[train] step=20 train_loss=2.1834 ...``) so SageMaker metric definitions
can scrape them with one regex each; the same figures land in ``$SM_OUTPUT_DATA_DIR/metrics.json``.

Read it top-down: ``main`` is the whole run, set-up and loop, and what it calls follows it: the loop's counters
(:class:`Progress`, saved in every checkpoint as the model is), the set-up pieces, the model, evaluation and the end.
The options are declared in ``options.py`` (the notebook side checks a job's hyperparameters against them before
launch), the rank, device, collectives and DDP wrap come from ``ranks.py``, checkpoints from ``checkpointing.py``, and
``container.py`` makes a failure the job's FailureReason.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import time
from contextlib import contextmanager, nullcontext
from dataclasses import asdict, dataclass, fields
from datetime import timedelta

import torch

import fastpath
import options
import profiling
from catalog_data import (
    PadCollator,
    TitlesTokenizedOnTheFly,
    TokenizedTitles,
    load_tokenizer,
    read_channel,
    read_labels,
)
from checkpointing import EXIT_STOPPED, Checkpointer
from container import run
from ranks import Dist, Metrics, pick_precision, require_finite
from sampling import GlobalBatchPlan

# dense tensor-core TFLOP/s used as the MFU denominator. H100/H200: the bf16 matmul ceiling measured on the
# workshop's reference machines (8192^3 GEMM, 788 on both), not the datasheet's 989: the workshop's H100 goals are
# stated against it. The others: datasheet dense bf16 (V100: fp16, it has no bf16), so compare MFU across GPUs with
# care (helpers/planning/scaling.py carries step times between GPUs with the catalogue's datasheet peaks only,
# helpers/planning/instances.py Gpu.peak_tflops).
MEASURED_PEAK_TFLOPS = {"H100": 788.0, "H200": 788.0, "A100": 312.0, "A10G": 125.0, "L4": 121.0, "V100": 125.0}


def parse_args(argv=None):
    """The options, declared in options.py (the notebook side reads them there, to check a job's hyperparameters
    before it starts); the ones SageMaker adds, which this script does not know, land in ``args.unknown``."""
    return options.parse_known(options.train_parser(description=__doc__.split("\n\n")[0]), argv)


def main(args) -> None:
    fastpath.check(args)  # contradictory switches fail before anything starts
    d = Dist(args.backend, timeout=timedelta(seconds=args.dist_timeout_s))  # a stalled rank fails the job
    torch.manual_seed(args.seed + d.rank)  # per-rank stream: dropout differs across ranks, as it should
    torch.set_num_threads(args.threads or torch.get_num_threads())  # workers + threads > cores: they fight
    precision = pick_precision(args.precision, d.device)
    amp_dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(precision)
    autocast = torch.autocast(d.device.type, dtype=amp_dtype) if amp_dtype else nullcontext()
    scaler = torch.amp.GradScaler(d.device.type, enabled=precision == "fp16")  # a no-op unless fp16
    per_rank_batch = d.per_rank(args.batch_size)  # --batch_size is the global batch: each rank trains its share

    labels, tokenizer = read_labels(args.train), load_tokenizer_for(args)
    # the data's preparation, timed: decoding and tokenizing every title, when that is done ahead (lab 07)
    (train_set, val_set, collate), prepared = profiling.timed(load_datasets, args, labels, tokenizer)
    sampler, loader = make_loader(train_set, collate, args, d)
    steps_per_epoch, total_steps = len(loader), planned_steps(args, len(loader))
    raw_model = build_model(args, len(tokenizer), len(labels), tokenizer.pad_token_id).to(d.device)
    new_step = fastpath.compile_model(raw_model, args)  # --compile, in place: before DDP wraps it
    model = d.ddp(raw_model) if d.enabled else raw_model  # DDP: gradients averaged across ranks in backward
    optimizer = fastpath.make_optimizer(raw_model, args)  # AdamW; --fused_adamw picks its fused kernel
    schedule = fastpath.make_schedule(optimizer, args, total_steps)  # linear warm-up, then linear decay
    print_setup(args, d, precision, raw_model, len(train_set), len(val_set), total_steps)
    metrics = Metrics(d)
    eval_due = eval_schedule(args.evals_per_epoch, steps_per_epoch, total_steps)

    # a restarted job (spot reclaim, SIGKILL) picks up where its newest good checkpoint left off, bit-identically
    progress = Progress()  # step, epoch and counters, saved as the model is: the data order resumes at its batch
    saved = dict(model=raw_model, optimizer=optimizer, schedule=schedule, scaler=scaler, metrics=metrics)
    facts = dict(world=d.world, precision=precision, total_steps=total_steps, labels=labels)  # a resume must match
    ckpt = Checkpointer.from_args(args, d, {**facts, "sampler": sampler.state_dict()}, **saved, progress=progress)
    ckpt.resume()
    refuse_past_the_end(progress, total_steps, args)
    flops_of = FlopCounter(raw_model)
    progress.start_clocks()
    profiler = profiling.start(args, d, total_steps)  # the data-wait clock; torch.profiler too with --profile
    model.train()
    while progress.step < total_steps:
        # mid-epoch after a resume: the epoch's plan from the batch the checkpoint had reached
        sampler.set_epoch(progress.epoch, start_batch=progress.step - progress.epoch * steps_per_epoch)
        for batch in profiler.batches(loader):
            batch = {k: v.to(d.device, non_blocking=True) for k, v in batch.items()}
            new_step()  # CUDA graphs (--compile_mode reduce-overhead) may now reuse the last step's buffers
            with autocast:
                loss = model(**batch).loss
            scaler.scale(loss).backward()
            scaler.unscale_(optimizer)
            torch.nn.utils.clip_grad_norm_(raw_model.parameters(), 1.0)
            scaler.step(optimizer)
            scaler.update()
            optimizer.zero_grad(set_to_none=True)
            schedule.step()
            profiler.step()
            step = progress.count(batch["input_ids"], args.batch_size, flops_of)  # samples, tokens, FLOPs
            epoch = round(step / steps_per_epoch, 3)
            if step % args.log_every == 0 or step == total_steps:
                loss_now = d.all_reduce(loss.detach().float().clone()).item() / d.world
                rate = progress.window(timed=step > args.log_every)  # the first window carries start-up costs
                lr = schedule.get_last_lr()[0]
                metrics.log("train", step=step, epoch=epoch, train_loss=loss_now, lr=lr, samples_per_sec=rate)
                require_finite("train_loss", loss_now, step, args.lr, precision)  # all-reduced: every rank agrees
            if eval_due(step):
                with progress.paused(), fastpath.eager(args):  # --compile: eval's widths are not worth a compile each
                    scores = evaluate(raw_model, val_set, collate, d, autocast, per_rank_batch * 2, len(labels))
                metrics.log("eval", step=step, epoch=epoch, **scores)
                require_finite("val_loss", scores["val_loss"], step, args.lr, precision)  # the weights after the step
            if ckpt.due(step):
                ckpt.save()  # model, optimizer, schedule, scaler, metrics; every rank its progress and RNG
                if ckpt.stopping:  # a SIGTERM reached a rank (where one is delivered): saved; leave before SIGKILL
                    d.exit(EXIT_STOPPED)
            if step >= total_steps:
                break
        progress.epoch += 1

    summary = {**summarize(progress, d, precision, raw_model, profiler), "data_prep_s": prepared}
    metrics.log("final", **last_eval(metrics), **summary)
    if d.master:
        save(args, raw_model, labels, metrics, summary, tokenizer)
    d.exit(0)


# ---------------------------------------------------------------------------------------------------- progress
@dataclass
class Progress:
    """The loop's counters: where it stands (step, epoch) and what it has done. Every rank saves its own in its
    checkpoint file and gets them back on resume, as the model gets its weights (``state_dict``/``load_state_dict``).
    Tokens and FLOPs are this rank's (with dynamic padding, widths differ by rank); samples are the global batches'.
    The clocks are not state: they start again in a resumed job, on top of the training time it had reached."""

    step: int = 0
    epoch: int = 0
    seen: int = 0  # samples
    tokens: int = 0
    flops: float = 0.0
    timed_seconds: float = 0.0  # the throughput windows after the first, which carries start-up costs
    timed_samples: int = 0
    train_seconds: float = 0.0  # training time, up to the last save (a resumed job's earlier runs included)

    def __post_init__(self):
        self.start_clocks()

    def state_dict(self) -> dict:
        return {**asdict(self), "train_seconds": self.seconds()}

    def load_state_dict(self, state: dict) -> None:
        for f in fields(self):
            setattr(self, f.name, state.get(f.name, getattr(self, f.name)))

    def start_clocks(self) -> None:
        """Training time from now, on top of ``train_seconds``; a new throughput window."""
        now = time.perf_counter()
        self._since, self._window_start, self._window_samples = now - self.train_seconds, now, 0

    def seconds(self) -> float:
        return time.perf_counter() - self._since

    def count(self, input_ids: torch.Tensor, global_batch: int, flops_of) -> int:
        """One step done, this rank's share of it ``input_ids``; the new step number."""
        rows, width = input_ids.shape
        self.step += 1
        self.seen += global_batch
        self._window_samples += global_batch
        self.tokens += rows * width
        self.flops += rows * flops_of(width)
        return self.step

    def window(self, timed: bool) -> float:
        """Samples/s since the last window; ``timed``: counted into the run's throughput."""
        now = time.perf_counter()
        rate = self._window_samples / (now - self._window_start)
        if timed:
            self.timed_seconds += now - self._window_start
            self.timed_samples += self._window_samples
        self._window_start, self._window_samples = now, 0
        return rate

    @contextmanager
    def paused(self):
        """The throughput window's clock stops meanwhile (evaluating is not training)."""
        start = time.perf_counter()
        try:
            yield
        finally:
            self._window_start += time.perf_counter() - start


def refuse_past_the_end(progress: Progress, total_steps: int, args) -> None:
    if progress.step > total_steps:  # a schedule shortened below the checkpoint (--resume_allow_changes)
        raise SystemExit(
            f"the checkpoint in {args.checkpoint_dir} is at step {progress.step}, past this run's last step "
            f"{total_steps}: raise --max_steps or --epochs, or point --checkpoint_dir at a fresh directory"
        )


# ---------------------------------------------------------------------------------------------------- set-up
def load_tokenizer_for(args):
    if args.hub_checkpoint:  # the case study's start: a pretrained multilingual encoder, with its own vocabulary
        from transformers import AutoTokenizer

        return AutoTokenizer.from_pretrained(args.hub_checkpoint)
    tokenizer_file = os.path.join(args.pretrained, "tokenizer.json") if args.pretrained else ""
    if not os.path.isfile(tokenizer_file):
        tokenizer_file = os.path.join(args.train, "tokenizer.json")
    return load_tokenizer(tokenizer_file)


def load_datasets(args, labels: list[str], tokenizer):
    """The training and validation titles, tokenized (ahead or ``--tokenize on_the_fly``), and how a batch is padded."""
    profiling.pin_cores(getattr(args, "cpu_set", ""))  # first: the threads and workers started later inherit it
    Titles = TitlesTokenizedOnTheFly if args.tokenize == "on_the_fly" else TokenizedTitles
    titles = read_channel(args.train, labels, args.subset)
    train_set = Titles(*titles, tokenizer, args.max_length, decode_ms=getattr(args, "decode_ms", 0.0))
    val_set = TokenizedTitles(*read_channel(args.validation, labels, args.eval_subset), tokenizer, args.max_length)
    collate = PadCollator(tokenizer.pad_token_id, pad_to=args.pad_to, multiple=args.pad_multiple)
    return train_set, val_set, collate


SHM = "/dev/shm"  # where DataLoader workers hand their batches to the trainer
SHM_FLOOR = 64 * 2**20  # below this, worker processes are not started at all
SHM_MARGIN = 2  # the batches' own bytes, doubled: collation's intermediates and other processes' use
PREFETCH = 2  # DataLoader's default prefetch_factor: batches in flight per worker


def shm_free(path: str = SHM) -> int | None:
    """Free bytes of ``path`` (None where there is no such file system, e.g. macOS)."""
    try:
        st = os.statvfs(path)
    except OSError:
        return None
    return st.f_bavail * st.f_frsize


def workers_that_fit(free: int | None, workers: int, batch_bytes: int, local_ranks: int = 1) -> int:
    """The most DataLoader workers, up to ``workers`` per rank, whose batches in flight fit ``free`` bytes of /dev/shm
    (every rank on the machine shares it): each worker holds ``PREFETCH`` batches, counted ``SHM_MARGIN`` times."""
    if free is None or workers == 0:
        return workers
    per_worker = PREFETCH * batch_bytes * SHM_MARGIN * local_ranks
    if free < SHM_FLOOR:
        return 0
    return min(workers, free // per_worker)


def fit_workers_to_shm(args, d: Dist, per_rank_batch: int) -> int:
    """``--num_workers``, lowered to what /dev/shm holds, said in one line. Both of torch's sharing strategies put
    a worker's tensors in /dev/shm, so only fewer workers avoid the bus error of a full one (Studio's is small)."""
    free, asked = shm_free(), args.num_workers
    if free is None or asked == 0:
        return asked
    batch_bytes = per_rank_batch * (2 * args.max_length + 1) * 8  # int64 input_ids and attention_mask, and labels
    local_ranks = int(os.environ.get("LOCAL_WORLD_SIZE", "1"))
    fit = workers_that_fit(free, asked, batch_bytes, local_ranks)
    need = max(SHM_FLOOR, asked * PREFETCH * batch_bytes * SHM_MARGIN * local_ranks)
    found = f"[setup] /dev/shm: {free / 2**20:.1f} MB free, {need / 2**20:.1f} MB wanted for {asked} workers' batches"
    if fit == asked:
        d.print(f"{found}: enough, {asked} DataLoader workers")
    else:
        fallback = "the trainer loads the batches itself" if fit == 0 else "fewer batches in flight"
        d.print(f"{found}: too small, DataLoader workers {asked} -> {fit} ({fallback}; a larger /dev/shm lifts it)")
    return fit


def make_loader(train_set, collate, args, d: Dist):
    # one global plan of batches per epoch, each rank taking its slice: step i trains on the same rows whatever the
    # world size, and a restart resumes from (epoch, batch) alone
    sampler = GlobalBatchPlan(
        len(train_set), args.batch_size, d.world, d.rank, args.seed, lengths=fastpath.bucket_keys(train_set, args)
    )  # --bucket_by_length
    args.num_workers = fit_workers_to_shm(args, d, d.per_rank(args.batch_size))  # a small /dev/shm: fewer workers
    # the loader's own generator: starting an iterator must not draw from (and shift) the global torch RNG
    loader = torch.utils.data.DataLoader(
        train_set,
        batch_sampler=sampler,
        collate_fn=collate,
        num_workers=args.num_workers,
        pin_memory=args.pin_memory and d.device.type == "cuda",
        persistent_workers=args.persistent_workers and args.num_workers > 0,
        generator=torch.Generator().manual_seed(args.seed),
    )
    if len(loader) == 0:
        raise SystemExit(f"{len(train_set)} training rows make no full batch of {args.batch_size}: lower --batch_size")
    return sampler, loader


def planned_steps(args, steps_per_epoch: int) -> int:
    total_steps = math.ceil(args.epochs * steps_per_epoch)
    return min(total_steps, args.max_steps) if args.max_steps else total_steps


def eval_schedule(evals: int, steps_per_epoch: int, total_steps: int):
    """Whether to evaluate after a step: ``evals`` times an epoch (>= 1: options.py's range), and after the last."""
    return lambda s: s == total_steps or (s * evals) // steps_per_epoch > ((s - 1) * evals) // steps_per_epoch


def print_setup(args, d: Dist, precision: str, model, train_rows: int, val_rows: int, total_steps: int) -> None:
    d.print(
        f"[setup] device={d.device.type} backend={d.backend} world_size={d.world} precision={precision} "
        f"model_size={args.model_size} params={sum(p.numel() for p in model.parameters())} train_rows={train_rows} "
        f"val_rows={val_rows} global_batch={args.batch_size} steps={total_steps} "
        f"host={os.environ.get('SM_CURRENT_HOST', 'local')}"
    )
    d.print(f"[setup] {fastpath.describe(args)}")
    if args.unknown:
        d.print(f"[setup] ignoring unknown arguments: {' '.join(args.unknown)}")


# ---------------------------------------------------------------------------------------------------- the model
def build_model(args, vocab_size: int, num_labels: int, pad_id: int):
    from transformers import DistilBertConfig, DistilBertForSequenceClassification
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()  # a progress bar per save is noise in a job log

    if args.hub_checkpoint:
        from transformers import AutoModelForSequenceClassification

        return AutoModelForSequenceClassification.from_pretrained(
            args.hub_checkpoint, num_labels=num_labels, attn_implementation=args.attn_implementation
        )
    if args.pretrained:
        return DistilBertForSequenceClassification.from_pretrained(
            args.pretrained, num_labels=num_labels, local_files_only=True, attn_implementation=args.attn_implementation
        )
    dim, layers, heads, ffn = options.CLASSIFIER_MODEL_SIZES[args.model_size]
    config = DistilBertConfig(
        vocab_size=vocab_size,
        dim=dim,
        n_layers=layers,
        n_heads=heads,
        hidden_dim=ffn,
        max_position_embeddings=max(512, args.max_length),
        num_labels=num_labels,
        pad_token_id=pad_id,
        dropout=args.dropout,
        attention_dropout=args.dropout,
        seq_classif_dropout=args.dropout,
        attn_implementation=args.attn_implementation,
    )
    return DistilBertForSequenceClassification(config)


class FlopCounter:
    """Training FLOPs for one sequence: 6 x dense (non-embedding) weights x tokens, plus attention's two matmuls
    (QK^T and AV: 2 x 2 x seq^2 x dim per layer forward, x3 with backward); the classifier head runs once per
    sequence, not per token. distilbert-base at seq 128: 33.5 GFLOP. Counted at the padded width: padding tokens
    cost the GPU as much as real ones."""

    HEAD = ("pre_classifier.", "classifier.")

    def __init__(self, model):
        self.layers, self.dim = model.config.n_layers, model.config.dim
        weights = [(n, p.numel()) for n, p in model.named_parameters() if "embeddings" not in n and p.dim() > 1]
        self.dense = sum(k for n, k in weights if not n.startswith(self.HEAD))
        self.head = sum(k for n, k in weights if n.startswith(self.HEAD))

    def __call__(self, seq_len: int) -> float:
        return 6 * self.dense * seq_len + 6 * self.head + 12 * self.layers * seq_len**2 * self.dim


@torch.no_grad()
def evaluate(model, data, collate, d: Dist, autocast, batch_size: int, num_labels: int) -> dict:
    """Loss, accuracy and macro-F1 over the whole validation set, sharded across ranks without padding."""
    model.eval()
    confusion = torch.zeros(num_labels, num_labels, dtype=torch.float64, device=d.device)
    loss_sum = torch.zeros((), dtype=torch.float64, device=d.device)
    mine = list(range(d.rank, len(data), d.world))
    for start in range(0, len(mine), batch_size):
        batch = {k: v.to(d.device) for k, v in collate([data[i] for i in mine[start : start + batch_size]]).items()}
        with autocast:
            logits = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits.float()
        loss_sum += torch.nn.functional.cross_entropy(logits, batch["labels"], reduction="sum")
        ones = torch.ones_like(batch["labels"], dtype=torch.float64)
        confusion.index_put_((batch["labels"], logits.argmax(-1)), ones, accumulate=True)
    d.all_reduce(confusion), d.all_reduce(loss_sum)
    model.train()
    tp, support, predicted = confusion.diag(), confusion.sum(1), confusion.sum(0)
    f1 = torch.where(support + predicted > 0, 2 * tp / (support + predicted).clamp(min=1), torch.zeros_like(tp))
    present = support > 0
    return {
        "val_loss": (loss_sum / support.sum()).item(),
        "val_accuracy": (tp.sum() / support.sum()).item(),
        "val_macro_f1": f1[present].mean().item(),
    }


# ---------------------------------------------------------------------------------------------------- the end
def summarize(progress: Progress, d: Dist, precision: str, model, profiler) -> dict:
    """The run's figures for the ``[final]`` line and metrics.json: throughput, tokens, FLOPs, the profiler's."""
    train_seconds = progress.seconds()
    if progress.timed_seconds:
        samples_per_sec = progress.timed_samples / progress.timed_seconds
    else:
        samples_per_sec = progress.seen / train_seconds
    # each rank counted its own share of tokens and FLOPs: the job's are their sum
    both = torch.tensor([progress.tokens, progress.flops], dtype=torch.float32, device=d.device)
    tokens, flops = d.all_reduce(both).tolist()
    summary = {
        "samples_per_sec": samples_per_sec,
        "tokens_per_sec": tokens / train_seconds,
        "train_seconds": train_seconds,
        "steps": progress.step,
        "samples": progress.seen,
        "precision": precision,
        "world_size": d.world,
        "params": sum(p.numel() for p in model.parameters()),
        "flops_per_sample": flops / max(progress.seen, 1),
    }
    summary.update(profiler.close())
    peak = peak_tflops(d.device)
    if peak:
        summary["mfu"] = samples_per_sec * summary["flops_per_sample"] / (peak * 1e12 * d.world)  # of all GPUs
    return summary


def peak_tflops(device: torch.device) -> float:
    if device.type != "cuda":
        return 0.0
    return next((v for k, v in MEASURED_PEAK_TFLOPS.items() if k in torch.cuda.get_device_name()), 0.0)


def last_eval(metrics: Metrics) -> dict:
    """The last evaluation's scores (rank 0 keeps the history; the loop evaluates after its last step)."""
    last = metrics.history[-1] if metrics.history else {}
    return {k: v for k, v in last.items() if k.startswith("val_")}


def save(args, model, labels, metrics: Metrics, summary: dict, tokenizer=None) -> None:
    """Rank 0 saves the unwrapped model (no DDP ``module.`` prefix) with what inference needs beside it."""
    os.makedirs(args.model_dir, exist_ok=True)
    model.save_pretrained(args.model_dir)
    if args.hub_checkpoint:  # the hub model's own vocabulary, not the catalogue's
        tokenizer.save_pretrained(args.model_dir)
    else:
        shutil.copy(os.path.join(args.train, "tokenizer.json"), args.model_dir)
    with open(os.path.join(args.model_dir, "labels.json"), "w", encoding="utf-8") as f:
        json.dump(labels, f, ensure_ascii=False)
    metrics.write(args, summary=summary)


if __name__ == "__main__":
    run(main, parse_args)
