"""Tensor parallel (``parallelize_module``, Megatron-style): every rank holds a slice of each attention and MLP matrix
and sees the whole batch; embeddings, norms and the LM head stay whole."""

from __future__ import annotations

from ranks import Dist
from strategy import Setup, adamw


def apply_tp(model, d: Dist, args) -> Setup:
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

    heads = model.config.num_attention_heads
    if heads % d.world or model.config.intermediate_size % d.world:
        raise SystemExit(
            f"--strategy tp splits {heads} heads and {model.config.intermediate_size} MLP columns "
            f"across {d.world} ranks: both must divide evenly; pick another --model_size or rank count"
        )
    mesh = init_device_mesh(d.device.type, (d.world,))
    # Megatron-style: split q/k/v and the MLP's up/gate by output columns, o_proj and down by input rows, so each
    # sub-block (attention, MLP) needs one all-reduce forward (its output) and one backward (its input's gradient):
    # two and two per decoder layer; heads split evenly across ranks
    plan = {
        "self_attn.q_proj": ColwiseParallel(),
        "self_attn.k_proj": ColwiseParallel(),
        "self_attn.v_proj": ColwiseParallel(),
        "self_attn.o_proj": RowwiseParallel(),
        "mlp.gate_proj": ColwiseParallel(),
        "mlp.up_proj": ColwiseParallel(),
        "mlp.down_proj": RowwiseParallel(),
    }
    for layer in model.model.layers:
        parallelize_module(layer, mesh, plan)
    return Setup(model, adamw(model.parameters(), args))
