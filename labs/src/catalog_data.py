"""Catalogue data as the training container sees it: CSV parts in a channel directory, tokenized once up front.

Standard library and torch only, so the same code runs in any SageMaker PyTorch image.
"""

from __future__ import annotations

import csv
import hashlib
import json
import os
import time
from pathlib import Path

import torch


class DataError(ValueError):
    """A channel's files are missing or malformed; the message names the file and line."""


def read_channel(channel_dir: str, labels: list[str], subset: int = 0) -> tuple[list[str], list[int]]:
    """Titles and label indices from every ``*.csv`` in a channel, in file-name order (the first ``subset`` rows)."""
    files = sorted(Path(channel_dir).glob("*.csv"))
    if not files:
        raise DataError(f"{channel_dir}: no .csv files in this channel. Check the channel's S3 prefix or local path.")
    index = {name: i for i, name in enumerate(labels)}
    titles, targets = [], []
    for path in files:
        try:
            for title, target in _part_rows(path, index):
                titles.append(title)
                targets.append(target)
                if subset and len(titles) >= subset:
                    return titles, targets
        except UnicodeDecodeError:
            raise DataError(_not_utf8(path)) from None
    if not titles:
        raise DataError(f"{channel_dir}: its .csv files hold a header and no rows: nothing to read in this channel.")
    return titles, targets


def _part_rows(path: Path, index: dict[str, int]):
    """(title, label index) of each row of one CSV part."""
    # utf-8-sig: Excel's "CSV UTF-8" starts with a byte-order mark that would stick to the first column's name
    with open(path, newline="", encoding="utf-8-sig") as f:
        reader = csv.reader(f)
        header = next(reader, [])
        if "title" not in header or "category" not in header:
            raise DataError(f"{path}, line 1: the header must name the columns title and category, found {header}.")
        t, c = header.index("title"), header.index("category")
        for line_no, fields in enumerate(reader, start=2):
            if len(fields) != len(header):
                raise DataError(f"{path}, line {line_no}: expected {len(header)} fields, found {len(fields)}.")
            if fields[c] not in index:
                raise DataError(f"{path}, line {line_no}: category {fields[c]!r} is not in labels.json.")
            yield fields[t], index[fields[c]]


def _not_utf8(path: Path) -> str:
    """Where ``path`` first stops being UTF-8, and how to convert it (found by a second, binary pass). The notebook
    side has its twin in helpers/data/catalog_files.py: the two rooms share no code."""
    offset = 0
    with open(path, "rb") as f:
        for line_no, raw in enumerate(f, start=1):  # a newline byte never sits inside a cp949 or UTF-8 character
            try:
                raw.decode("utf-8")
            except UnicodeDecodeError as e:
                return (
                    f"{path}, line {line_no} (byte {offset + e.start}): not UTF-8 text. Save it as UTF-8 "
                    f"(e.g. `iconv -f cp949 -t utf-8 in.csv > out.csv`)."
                )
            offset += len(raw)
    return f"{path}: not UTF-8 text. Save it as UTF-8 (e.g. `iconv -f cp949 -t utf-8 in.csv > out.csv`)."


def read_labels(channel_dir: str) -> list[str]:
    path = Path(channel_dir) / "labels.json"
    fix = "Rebuild the catalogue with `python -m catalog_generator build` (or `from-csv`) and upload it again."
    if not path.is_file():
        raise DataError(f"{path}: missing. The train channel must carry labels.json next to its CSV parts. {fix}")
    try:
        labels = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:  # a truncated upload or a hand edit
        raise DataError(f"{path}: not valid JSON ({e}). {fix}") from None
    if not isinstance(labels, list) or not labels or not all(isinstance(x, str) for x in labels):
        raise DataError(f"{path}: must be a JSON list of category names, found {str(labels)[:80]}. {fix}")
    return labels


def load_tokenizer(path: str):
    from transformers import PreTrainedTokenizerFast

    if not os.path.isfile(path):
        raise DataError(f"{path}: missing. The train channel must carry the tokenizer.json it was built with.")
    try:
        return PreTrainedTokenizerFast(
            tokenizer_file=path,
            pad_token="[PAD]",
            unk_token="[UNK]",
            cls_token="[CLS]",
            sep_token="[SEP]",
            mask_token="[MASK]",
        )
    except Exception as e:  # the tokenizers library's own error names no file ("EOF while parsing ... line 1276")
        raise DataError(
            f"{path}: not a tokenizer file the tokenizers library can read ({e}): a copy or upload cut short? "
            f"Upload the catalogue's tokenizer.json again, or rebuild the catalogue."
        ) from None


def decode(title: str, cpu_ms: float) -> str:
    """The title, after ``cpu_ms`` of this thread's CPU time spent hashing it: the per-sample decoding of a raw
    record (an image, an audio clip) that a real loader does, at a cost that is the same on any machine's cores."""
    if cpu_ms <= 0:
        return title
    digest, end = title.encode(), time.thread_time() + cpu_ms / 1e3
    while time.thread_time() < end:
        for _ in range(32):
            digest = hashlib.blake2b(digest, digest_size=16).digest()
    return title


class TokenizedTitles(torch.utils.data.Dataset):
    """Token ids per title, kept unpadded: padding happens per batch, to that batch's longest title. Each title is
    decoded (``decode_ms``) and tokenized once, here, before training."""

    def __init__(self, titles: list[str], targets: list[int], tokenizer, max_length: int, decode_ms: float = 0.0):
        titles = [decode(t, decode_ms) for t in titles]
        self.ids = tokenizer(titles, truncation=True, max_length=max_length)["input_ids"]
        self.targets = targets

    def __len__(self) -> int:
        return len(self.ids)

    def __getitem__(self, i: int):
        return self.ids[i], self.targets[i]


class TitlesTokenizedOnTheFly(torch.utils.data.Dataset):
    """The same items as :class:`TokenizedTitles`, tokenized one title at a time in ``__getitem__``.

    The common raw-data pipeline (decode and tokenize per sample, inside the loader): every epoch pays the work
    again, and it runs in the trainer process or in DataLoader workers that compete with it for the CPU cores.
    """

    def __init__(self, titles: list[str], targets: list[int], tokenizer, max_length: int, decode_ms: float = 0.0):
        self.titles, self.targets, self.tokenizer, self.max_length = titles, targets, tokenizer, max_length
        self.decode_ms = decode_ms

    @property
    def ids(self):
        raise DataError(
            "token lengths are only known up front with --tokenize ahead: --bucket_by_length needs "
            "them, so use --tokenize ahead with it."
        )

    def __len__(self) -> int:
        return len(self.titles)

    def __getitem__(self, i: int):
        title = decode(self.titles[i], self.decode_ms)
        ids = self.tokenizer(title, truncation=True, max_length=self.max_length)["input_ids"]
        return ids, self.targets[i]


class PadCollator:
    """Pads a batch to its longest title rounded up to ``multiple`` (dynamic padding), or to ``pad_to`` when set.

    A ``multiple`` of 8 or 16 bounds how many widths batches take: each is a compiled graph under torch.compile.
    """

    def __init__(self, pad_id: int, pad_to: int = 0, multiple: int = 1):
        self.pad_id, self.pad_to, self.multiple = pad_id, pad_to, multiple

    def __call__(self, batch):
        longest = max(len(ids) for ids, _ in batch)
        if self.pad_to and longest > self.pad_to:
            raise ValueError(
                f"a title of {longest} tokens does not fit pad_to={self.pad_to}: pad to at least the "
                f"tokenizer's max_length"
            )
        width = self.pad_to or -(-longest // self.multiple) * self.multiple
        input_ids = torch.full((len(batch), width), self.pad_id, dtype=torch.long)
        for row, (ids, _) in enumerate(batch):
            input_ids[row, : len(ids)] = torch.tensor(ids, dtype=torch.long)
        return {
            "input_ids": input_ids,
            "attention_mask": (input_ids != self.pad_id).long(),
            "labels": torch.tensor([label for _, label in batch], dtype=torch.long),
        }
