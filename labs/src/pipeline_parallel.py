"""Pipeline parallel (``torch.distributed.pipelining``): rank r holds the r-th run of decoder layers (rank 0 also the
embeddings, the last rank the final norm and LM head); the batch flows through in ``--microbatches`` micro-batches on
a GPipe or 1F1B schedule."""

from __future__ import annotations

import re

import torch
import torch.distributed as dist

from llama import token_loss
from ranks import Dist
from strategy import Setup, adamw


def apply_pp(model, d: Dist, args) -> Setup:
    from torch.distributed.pipelining import PipelineStage, Schedule1F1B, ScheduleGPipe

    stage = DecoderSlice(model, d.rank, d.world)
    schedule = {"gpipe": ScheduleGPipe, "1f1b": Schedule1F1B}[args.pp_schedule]
    # the schedule splits the batch into equal micro-batches and averages their mean losses' gradients
    # (scale_grads): with equal sizes that is the gradient of the whole batch's mean loss
    pipe = schedule(PipelineStage(stage, d.rank, d.world, d.device), args.microbatches, loss_fn=token_loss)
    return Pipeline(stage, adamw(stage.parameters(), args), pipe, d)


class DecoderSlice(torch.nn.Module):
    """Stage ``index`` of ``stages``: its share of the decoder layers; the first stage also embeds the tokens, the last
    also applies the final norm and LM head. The others' modules are dropped, so their memory is never held."""

    def __init__(self, lm, index: int, stages: int):
        super().__init__()
        per_stage = len(lm.model.layers) // stages
        self.first_layer, self.is_first, self.is_last = index * per_stage, index == 0, index == stages - 1
        lm.model.layers = lm.model.layers[self.first_layer : self.first_layer + per_stage]
        if not self.is_first:
            lm.model.embed_tokens = None
        if not self.is_last:
            lm.model.norm, lm.lm_head = torch.nn.Identity(), torch.nn.Identity()
        self.lm = lm

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        inputs = {"input_ids": x} if self.is_first else {"inputs_embeds": x}
        return self.lm.lm_head(self.lm.model(**inputs).last_hidden_state)  # logits on the last stage

    def checkpoint_state(self) -> dict:
        """The plain model's names: this stage's layer i is layer ``first_layer + i`` of the whole model."""
        shift = lambda m: f"layers.{int(m[1]) + self.first_layer}."  # noqa: E731
        return {re.sub(r"layers\.(\d+)\.", shift, k): v for k, v in self.lm.state_dict().items()}


class Pipeline(Setup):
    """apply_pp's Setup: every rank sees the whole batch (rank 0 its tokens, the last rank its targets); the last
    stage's loss is broadcast, so every rank reports the loss of the whole batch."""

    def __init__(self, stage: DecoderSlice, optimizer, schedule, d: Dist):
        super().__init__(stage, optimizer)
        self.schedule, self.d, self.last = schedule, d, d.world - 1

    def train_step(self, x, y, autocast) -> torch.Tensor:
        losses = []
        # batch[:, :-1] is a view with the stride of the whole block: torch 2.8's stages check their inputs'
        # strides against the shapes they were built for ("stride mismatch"), so hand them compact tensors
        x, y = x.contiguous(), y.contiguous()
        with autocast:
            self.schedule.step(*[x] if self.model.is_first else [], target=y, losses=losses)
        loss = torch.stack(losses).mean().detach() if self.model.is_last else torch.zeros((), device=x.device)
        dist.broadcast(loss, src=self.last)
        return loss

    def eval_loss(self, x, y, autocast) -> torch.Tensor:
        """The whole batch at once, stage by stage over point-to-point sends (the schedule's buffers are sized for
        training micro-batches)."""
        h = x
        if not self.model.is_first:
            h = torch.empty(*x.shape, self.model.lm.config.hidden_size, device=x.device)
            dist.recv(h, src=self.d.rank - 1)
        with autocast:
            h = self.model(h).float()
        loss = token_loss(h, y) if self.model.is_last else torch.zeros((), device=x.device)
        if not self.model.is_last:
            dist.send(h.contiguous(), dst=self.d.rank + 1)
        dist.broadcast(loss, src=self.last)
        return loss
