"""The end of train_lm.py's run, on rank 0: a few greedy tokens from the reloaded single-process model, then that
model saved for inference (``save_pretrained``) next to the sharded checkpoints."""

from __future__ import annotations

import os
import shutil

import torch


def sample_and_save(args, tokenizer, val_blocks, model, strategy: str) -> dict:
    """A few greedy tokens from the reloaded model, then that model saved for inference."""
    starts = (val_blocks[0] == tokenizer.cls_token_id).nonzero()  # a title's first tokens, from its [CLS]
    first = int(starts[0]) if len(starts) and int(starts[0]) + 3 <= val_blocks.shape[1] else 0
    prompt = val_blocks[:1, first : first + 3]
    with torch.no_grad():  # greedy, until the end of a title ([SEP]) or generate_tokens
        out = model.generate(
            prompt,
            max_new_tokens=args.generate_tokens,
            do_sample=False,
            eos_token_id=tokenizer.sep_token_id,
            pad_token_id=tokenizer.pad_token_id,
        )
    sample = {"prompt": tokenizer.decode(prompt[0]), "generated": tokenizer.decode(out[0, prompt.shape[1] :])}
    print(f"[sample] strategy={strategy} {sample['prompt']!r} -> {sample['generated']!r}", flush=True)
    os.makedirs(args.model_dir, exist_ok=True)
    model.save_pretrained(args.model_dir)  # the consolidated model, next to the sharded checkpoints
    shutil.copy(os.path.join(args.train, "tokenizer.json"), args.model_dir)
    return sample
