"""The language model train_lm.py trains under every strategy: a small Llama (``LlamaForCausalLM`` built from a
config: random weights, no download) sized by ``--model_size`` (options.LM_MODEL_SIZES), and its loss."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from options import LM_MODEL_SIZES


def build_model(args, vocab_size: int):
    from transformers import LlamaConfig, LlamaForCausalLM
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()  # a progress bar per save is noise in a job log

    hidden, layers, heads, ffn = LM_MODEL_SIZES[args.model_size]
    config = LlamaConfig(
        vocab_size=vocab_size,
        hidden_size=hidden,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=heads,
        intermediate_size=ffn,
        max_position_embeddings=args.block_size,
        tie_word_embeddings=False,
        attn_implementation="sdpa",
        use_cache=False,
    )
    return LlamaForCausalLM(config)


def lm_loss(model, x: torch.Tensor, y: torch.Tensor, autocast) -> torch.Tensor:
    # An explicit all-ones mask: without one, transformers 4.57 (SageMaker Distribution 4.x) reads the rows as packed
    # sequences and builds a batch x tokens x tokens mask that attention keeps for backward; with it, 4.57 and 5.x
    # both take SDPA's is_causal path, and the activations are the ones lab 04's planner counts.
    with autocast:
        logits = model(input_ids=x, attention_mask=torch.ones_like(x)).logits
    return token_loss(logits, y)


def token_loss(logits: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Mean cross-entropy over every token of the batch."""
    return F.cross_entropy(logits.float().flatten(0, 1), y.flatten())
