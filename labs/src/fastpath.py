"""The single-GPU fast path: each speed-up is one flag of train.py, so a lab can switch them on one at a time.

What each buys on a GPU (why, not how much: the benchmark ``benchmarks/single_gpu.py`` measures how much):

- ``--precision bf16``: matmuls on tensor cores at bf16 rates, half the activation memory traffic.
- ``--fused_adamw``: the optimizer step as a few kernels over all parameters instead of several per tensor.
- ``--attn_implementation sdpa``: PyTorch's fused attention kernels instead of separate matmul/softmax/matmul.
- ``--compile``: torch.compile fuses the elementwise work between matmuls (layer norms, GELU, dropout, residuals)
  into few kernels, so the GPU reads activations once instead of once per operation.
- ``--compile_mode reduce-overhead``: CUDA graphs replay a whole step's kernels with one launch; what helps when
  batches are small and the CPU cannot launch kernels as fast as the GPU runs them.
- dynamic padding (default), ``--pad_multiple`` and ``--bucket_by_length``: short titles stop paying for padding.
  ``--pad_to`` pads every batch to one width instead, the baseline those are measured against.

Standard library and torch only, like the rest of the source_dir.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from contextlib import nullcontext

import torch

from options import COMPILE_MODES  # noqa: F401 - the --compile_mode choices, declared with train.py's options


def check(args) -> None:
    """Refuse contradictory fast-path settings before any data is read or model built."""
    if args.pad_to < 0 or args.pad_multiple < 1:
        raise SystemExit(
            f"--pad_to must be >= 0 (0: dynamic padding) and --pad_multiple >= 1, got "
            f"--pad_to {args.pad_to} --pad_multiple {args.pad_multiple}"
        )
    if args.pad_to and args.pad_to < args.max_length:
        raise SystemExit(
            f"--pad_to {args.pad_to} is narrower than --max_length {args.max_length}: titles are cut at "
            f"max_length, so pad to at least that (or lower --max_length)"
        )
    if args.compile_mode != "default" and not args.compile:
        raise SystemExit(f"--compile_mode {args.compile_mode} needs --compile true")


def widths(args) -> int:
    """How many padded widths batches can have: each is one compiled graph (and one CUDA graph)."""
    return 1 if args.pad_to else math.ceil(args.max_length / args.pad_multiple)


def bucket_keys(titles, args) -> list[int] | None:
    """``--bucket_by_length``: the key batches are grouped by, a title's length in steps of 8 tokens (or of
    ``--pad_multiple`` if wider); None without bucketing.

    Not the exact length: batches of titles of one exact length hold few categories each, which slows learning
    (tiny model, 3,000 titles, 3 epochs, lr 1e-3, four seeds: 0.57-0.64 validation accuracy against 0.65-0.73
    without buckets). Steps of 8 cost at most 7 padding tokens a title, and titles within a step stay in shuffled
    order (the plan's sort is stable): 0.59-0.70 over the same seeds.
    """
    if not args.bucket_by_length:
        return None
    step = max(8, args.pad_multiple)
    return [-(-len(ids) // step) for ids in titles.ids]


def make_optimizer(model: torch.nn.Module, args) -> torch.optim.Optimizer:
    """AdamW; ``--fused_adamw`` uses its fused kernel (CUDA, and CPU since torch 2.4), else the foreach one."""
    return torch.optim.AdamW(
        model.parameters(), lr=args.lr, weight_decay=args.weight_decay, fused=True if args.fused_adamw else None
    )


def make_schedule(optimizer: torch.optim.Optimizer, args, total_steps: int):
    """Linear warm-up over ``--warmup_ratio`` of the steps, then linear decay to zero at the last one."""
    warmup = max(1, int(args.warmup_ratio * total_steps))
    return torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda s: min((s + 1) / warmup, max(0.0, (total_steps - s) / max(1, total_steps - warmup)))
    )


def compile_model(model: torch.nn.Module, args) -> Callable[[], None]:
    """``--compile``: compile the model in place (``nn.Module.compile``), so its state_dict keys, save_pretrained,
    checkpoints and a DDP wrapper around it are unchanged. Returns what the loop calls before each step.

    Shapes are static: one graph per padded width, which CUDA graphs need anyway. Dynamic padding would make up to
    ``max_length`` widths; ``--pad_multiple`` (8 or 16) keeps them few, and the recompile limit is raised to cover
    them, so no width silently falls back to eager. Evaluation runs eager (:func:`eager`).
    """
    if not args.compile:
        return no_op
    # the classifier sets config.problem_type on its first call; set it now or dynamo recompiles on the second
    if getattr(model.config, "problem_type", "") is None and model.config.num_labels > 1:
        model.config.problem_type = "single_label_classification"
    config = torch._dynamo.config
    limit = "recompile_limit" if hasattr(config, "recompile_limit") else "cache_size_limit"  # torch < 2.7's name
    setattr(config, limit, max(getattr(config, limit), 2 * widths(args) + 8))
    model.compile(
        mode=None if args.compile_mode == "default" else args.compile_mode, backend=args.compile_backend, dynamic=False
    )
    if args.compile_mode in ("reduce-overhead", "max-autotune"):
        # CUDA graphs replay into the same output buffers: tell them where one step ends, so a graph never
        # overwrites what the step before still holds (the logged loss, say)
        return torch.compiler.cudagraph_mark_step_begin
    return no_op


def no_op() -> None:
    pass


def eager(args):
    """Run compiled code uncompiled inside this block: evaluation sees every width once or twice (and a shorter last
    batch), so compiling each would cost more than it saves."""
    return torch.compiler.set_stance("force_eager") if args.compile else nullcontext()


def describe(args) -> str:
    """The fast-path switches, for the ``[setup]`` lines of a job log."""
    padding = f"pad_to={args.pad_to}" if args.pad_to else f"pad_multiple={args.pad_multiple}"
    return (
        f"fused_adamw={args.fused_adamw} compile={args.compile} compile_mode={args.compile_mode} "
        f"attn={args.attn_implementation} {padding} bucket_by_length={args.bucket_by_length}"
    )
