"""Where this process runs, for both training scripts: its rank in the job and its device (:class:`Dist`, with the DDP
wrap and the split of the global batch), the precision that device computes in (:func:`pick_precision`), the metric
lines rank 0 prints and its ``metrics.json`` (:class:`Metrics`), and the job's end when its loss diverges
(:func:`require_finite`).

A script reaches torch.distributed through :class:`Dist` only, so nothing else in it changes with the world size.
"""

from __future__ import annotations

import json
import math
import os
import sys

import torch
import torch.distributed as dist

import container


class Dist:
    """Rank and world from the launcher's environment; one process without it (nanoGPT's one-line DDP detection).

    torchrun sets RANK/LOCAL_RANK/WORLD_SIZE; mpirun (the launcher SageMaker uses for SMDDP) sets OMPI_COMM_WORLD_*.
    """

    @staticmethod
    def restart_store(world: int, timeout=None):
        """The process group's store for a group torchrun restarted (``--max-restarts``), None for a first start.

        torchrun's static rendezvous (``--master_addr``/``--master_port``: the SageMaker driver's command) keeps one
        TCPStore, in its agent, across restarts, and torch adds no per-attempt prefix when workers use the agent's
        store (``TORCHELASTIC_USE_AGENT_STORE``): a restarted group would read the addresses its dead predecessors
        published there and fail to connect (``Gloo connectFullMesh ... Connection refused``; NCCL, a stale unique
        id). The restart count, which every restarted rank has, makes a prefix of its own for each attempt.
        """
        from datetime import timedelta

        env = os.environ.get
        attempt = int(env("TORCHELASTIC_RESTART_COUNT", "0"))
        if not attempt or env("TORCHELASTIC_USE_AGENT_STORE") != "True":
            return None
        address, port = env("MASTER_ADDR"), int(env("MASTER_PORT"))
        store = dist.TCPStore(address, port, world, is_master=False, timeout=timeout or timedelta(minutes=30))
        return dist.PrefixStore(f"restart-{attempt}", store)

    def __init__(self, backend: str, timeout=None):
        env = os.environ.get
        self.enabled = env("RANK", env("OMPI_COMM_WORLD_RANK")) is not None
        self.rank = int(env("RANK", env("OMPI_COMM_WORLD_RANK", 0)))
        self.local_rank = int(env("LOCAL_RANK", env("OMPI_COMM_WORLD_LOCAL_RANK", 0)))
        self.world = int(env("WORLD_SIZE", env("OMPI_COMM_WORLD_SIZE", 1)))
        self.master = self.rank == 0
        self.device = torch.device(f"cuda:{self.local_rank}" if torch.cuda.is_available() else "cpu")
        if self.device.type == "cuda":
            torch.cuda.set_device(self.device)
        self.backend = self.pick_backend(backend) if self.enabled else "none"
        if self.enabled:
            # timeout: how long a rank waits in a collective before the job fails (the scripts' --dist_timeout_s);
            # None keeps the backend's default (gloo's 30 minutes leaves a stalled rank hanging the job that long)
            dist.init_process_group(
                backend=self.backend,
                rank=self.rank,
                world_size=self.world,
                device_id=self.device if self.backend == "nccl" else None,
                store=self.restart_store(self.world, timeout),
                **({"timeout": timeout} if timeout else {}),
            )

    def pick_backend(self, requested: str) -> str:
        """The collectives library: NCCL on GPUs, gloo on CPUs, or SMDDP where its SageMaker image provides it."""
        native = "nccl" if self.device.type == "cuda" else "gloo"
        if requested != "smddp":
            return native if requested == "auto" else requested
        try:  # the SMDDP diff: this import registers "smddp" as a torch.distributed backend
            import smdistributed.dataparallel.torch.torch_smddp  # noqa: F401

            return "smddp"
        except Exception as e:  # noqa: BLE001 - missing, or built for another PyTorch: say which, then fall back
            why = f"{type(e).__name__}: {e}"
        if "MASTER_ADDR" not in os.environ:  # a bare mpirun launch: no rendezvous address to fall back on
            raise SystemExit(
                f"--backend smddp under mpirun, but SMDDP cannot be imported ({why}). Use an image that ships "
                f"SMDDP (a SageMaker GPU DLC for PyTorch 2.3 to 2.5, or an SMP image) or distribution='torchrun'."
            )
        self.print(
            f"[warn] --backend smddp: SMDDP cannot be imported here ({why}); falling back to {native}. "
            f"It ships only in SageMaker's SMDDP images (ml.p4d, ml.p4de, ml.p3dn)."
        )
        return native

    def all_reduce(self, tensor: torch.Tensor) -> torch.Tensor:
        if self.enabled:
            dist.all_reduce(tensor)
        return tensor

    def ddp(self, model, **options):
        """``model`` in DistributedDataParallel: rank 0's initial weights go to every rank, and backward averages the
        gradients across ranks (all-reduce, bucket by bucket while backward still runs)."""
        gpus = [self.local_rank] if self.device.type == "cuda" else None
        return torch.nn.parallel.DistributedDataParallel(model, device_ids=gpus, **options)

    def per_rank(self, batch_size: int) -> int:
        """This rank's rows of a global batch of ``batch_size`` (the scripts' ``--batch_size`` is the global batch)."""
        if batch_size % self.world:
            raise SystemExit(f"--batch_size {batch_size} is the global batch; it must divide by the {self.world} ranks")
        return batch_size // self.world

    def print(self, *a):
        if self.master:
            say(" ".join(map(str, a)))

    def exit(self, code: int = 0):
        """Leave cleanly, past gloo's abort at interpreter exit (:func:`container.leave`)."""
        container.leave(code, process_group=self.enabled)


def say(line: str) -> None:
    """One log line in one write: every rank prints into one log, unbuffered (``PYTHONUNBUFFERED``, as SageMaker
    runs it), and print()'s two writes (text, then newline) let another rank's line land between them."""
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def pick_precision(requested: str, device: torch.device, without_bf16: str = "fp16") -> str:
    # bf16 tensor cores start with Ampere (8.0); torch.cuda.is_bf16_supported() also says yes to older GPUs, where
    # bf16 is emulated and slower than fp32
    bf16_cores = device.type == "cuda" and torch.cuda.get_device_capability(device) >= (8, 0)
    if requested == "auto":
        return "bf16" if bf16_cores else "fp32"
    if device.type == "cpu" and requested == "fp16":
        raise SystemExit("--precision fp16 needs a GPU; use bf16 or fp32 on CPU")
    if device.type == "cuda" and requested == "bf16" and not bf16_cores:
        # the same notebook runs on a T4 or V100: their mixed precision is fp16 (loss-scaled), said in the log
        say(
            f"[warn] --precision bf16: {torch.cuda.get_device_name(device)} has no bf16 tensor cores; "
            f"running {without_bf16} instead"
        )
        return without_bf16
    return requested


def require_finite(name: str, value: float, step: int, lr: float, precision: str) -> None:
    """A loss that is nan or inf does not come back: fail the job now, saying why, instead of "Completed" with a NaN
    model. The scripts check losses already on the CPU, reduced across ranks: no extra sync, and every rank agrees."""
    if not math.isfinite(value):
        raise SystemExit(
            f"{name} is {value} at step {step} (lr={lr:g}, precision={precision}): training diverged, and no model "
            f"is saved. Lower --lr" + (", or train in fp32 (--precision fp32)" if precision != "fp32" else "")
        )


class Metrics:
    """Collects metric lines on rank 0: printed in scrape-friendly ``key=value`` form and kept for metrics.json."""

    def __init__(self, d: Dist):
        self.d, self.history = d, []

    def log(self, kind: str, **values):
        if not self.d.master:
            return
        self.history.append({"kind": kind, **values})
        body = " ".join(f"{k}={v:.6g}" if isinstance(v, float) else f"{k}={v}" for k, v in values.items())
        say(f"[{kind}] {body}")

    def write(self, args, **results) -> None:
        """``$SM_OUTPUT_DATA_DIR/metrics.json``: ``results``, every metric line logged, and the hyperparameters."""
        os.makedirs(args.output_data_dir, exist_ok=True)
        hyperparameters = {k: v for k, v in vars(args).items() if k != "unknown"}
        with open(os.path.join(args.output_data_dir, "metrics.json"), "w", encoding="utf-8") as f:
            json.dump({**results, "history": self.history, "hyperparameters": hyperparameters}, f, indent=1)
