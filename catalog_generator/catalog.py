"""A deterministic generator of e-commerce product titles (with a little label noise, so no model reaches 100%), and
the catalogue files the labs train on::

    train/part-00000.csv        id,title,category (more parts for large sets)
    train/labels.json           the leaf categories, in label-index order
    train/tokenizer.json        WordPiece tokenizer trained on the training titles
    validation/part-00000.csv   a stratified 10% of every category
    manifest.json               how it was made (rows, seed, generator version, the command) and every file's
                                size, SHA-256 and rows: a lab refuses a catalogue that no longer matches it

Made by ``python -m catalog_generator build|shards|from-csv``; read back by :mod:`helpers.data.catalog_files`.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import shutil
import tempfile
from collections import Counter, defaultdict
from collections.abc import Iterable
from pathlib import Path

from catalog_generator.titles import GENERATOR_VERSION, categories, generate_rows
from helpers.data.catalog_files import (
    CatalogError,
    Row,
    file_record,
    load_manifest,
    read_rows,
    verify_catalogue,
    write_rows,
)

VALIDATION_FRACTION = 0.1
MIN_VOCAB_SIZE = 100  # below this WordPiece keeps little more than single characters
TOKENIZER_ROWS = 200_000  # a sharded catalogue's tokenizer learns from its first titles, this many at most


def stratified_split(
    rows: list[Row], fraction: float = VALIDATION_FRACTION, seed: int = 0, source: str = "the catalogue"
) -> tuple[list[Row], list[Row]]:
    """Hold out ``fraction`` of every category (at least one row each), as the case study did."""
    by_class: dict[str, list[Row]] = defaultdict(list)
    for row in rows:
        by_class[row.category].append(row)
    need = math.ceil(1 / fraction)
    too_small = {c: len(r) for c, r in by_class.items() if len(r) < need}
    if too_small:
        worst = ", ".join(f"{c!r} ({n} rows)" for c, n in sorted(too_small.items(), key=lambda kv: kv[1])[:5])
        raise CatalogError(
            f"{source}: {len(too_small)} categor{'y has' if len(too_small) == 1 else 'ies have'} fewer "
            f"than {need} rows, too few for a stratified {fraction:.0%} validation split: {worst}. "
            f"Add rows, merge the category into its parent, or drop it."
        )
    rng = random.Random(seed)
    train, val = [], []
    for category in sorted(by_class):
        members = by_class[category][:]
        rng.shuffle(members)
        k = max(1, round(len(members) * fraction))
        val += members[:k]
        train += members[k:]
    rng.shuffle(train)
    rng.shuffle(val)
    return train, val


def train_tokenizer(titles: Iterable[str], vocab_size: int = 8000):
    """A BERT-style WordPiece tokenizer trained here, on the training titles only (no hub download).

    Deterministic: the same titles give the same vocabulary and ids. The library's trainer gives each word-inner
    piece (``##a``) its id in hash-map order, which differs from one process to the next, and breaks ties between
    equally frequent merges by id (huggingface/tokenizers#1794, open as of 0.23). Listing every such piece up front,
    in sorted order, fixes their ids; the trained vocabulary is then loaded into a plain WordPiece model, so they are
    ordinary tokens, not special ones.
    """
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers

    titles = list(titles)
    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]

    def blank() -> Tokenizer:
        tok = Tokenizer(models.WordPiece(unk_token="[UNK]"))
        # strip_accents=False: accent stripping decomposes Hangul syllables into jamo
        tok.normalizer = normalizers.BertNormalizer(lowercase=True, strip_accents=False, clean_text=True)
        tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
        tok.decoder = decoders.WordPiece()
        return tok

    trainee = blank()
    words = (w for t in titles for w, _ in trainee.pre_tokenizer.pre_tokenize_str(trainee.normalizer.normalize_str(t)))
    inner = sorted({"##" + c for w in words for c in w[1:]})
    trainer = trainers.WordPieceTrainer(
        vocab_size=vocab_size, special_tokens=specials + inner, min_frequency=2, show_progress=False
    )
    trainee.train_from_iterator(titles, trainer=trainer)

    tok = blank()
    tok.model = models.WordPiece(trainee.get_vocab(with_added_tokens=True), unk_token="[UNK]")
    tok.add_special_tokens(specials)
    cls, sep = tok.token_to_id("[CLS]"), tok.token_to_id("[SEP]")
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", special_tokens=[("[CLS]", cls), ("[SEP]", sep)]
    )
    return tok


def _check_request(out: str | os.PathLike, vocab_size: int, rows: int = 1) -> None:
    """Refuse a request before any work is done or anything written."""
    if rows < 1:
        raise CatalogError(f"rows={rows}: a catalogue needs rows (the shipped one has 30000).")
    if vocab_size < MIN_VOCAB_SIZE:
        raise CatalogError(f"vocab_size={vocab_size}: use at least {MIN_VOCAB_SIZE} (the shipped catalogue has 8000).")
    _check_out(Path(out))


def _check_out(out: Path) -> None:
    """Replace only a catalogue this module wrote: a rebuild swaps out the whole directory, whatever it holds."""
    if os.path.lexists(out) and not out.is_dir():
        raise CatalogError(
            f"--out {out} is a file, not a directory: give a new directory (or an existing catalogue) as --out."
        )
    if out.is_dir() and any(out.iterdir()) and not _is_catalogue(out):
        raise CatalogError(
            f"--out {out} exists and is not a catalogue written by catalog_generator.catalog (no valid "
            f"manifest.json): building there would delete what it holds. Give a new directory as "
            f"--out, or remove this one yourself first."
        )


def _is_catalogue(root: Path) -> bool:
    """A catalogue this module wrote: its manifest says so, or (the manifest lost or cut) it holds only what a
    build writes."""
    try:
        load_manifest(root)
    except CatalogError:
        folders = [p for p in root.iterdir() if p.name != "manifest.json"]
        written = ("labels.json", "tokenizer.json")
        return (
            "train" in {p.name for p in folders}
            and all(p.name in ("train", "validation") and p.is_dir() for p in folders)
            and all(
                f.name in written or (f.name.startswith("part-") and f.suffix == ".csv")
                for d in folders
                for f in d.iterdir()
            )
        )
    return True


class _Staging:
    """Write a directory beside its destination, then swap it in: a failure leaves nothing half-written."""

    def __init__(self, out: str | os.PathLike):
        self.out = Path(out)

    def __enter__(self) -> Path:
        _check_out(self.out)  # the writers check first; this is the guarantee at the point of deleting
        self.out.parent.mkdir(parents=True, exist_ok=True)
        self.tmp = Path(tempfile.mkdtemp(prefix=f".{self.out.name}.", dir=self.out.parent))
        return self.tmp

    def __exit__(self, exc_type, exc, tb):
        if exc_type is not None:
            shutil.rmtree(self.tmp, ignore_errors=True)
            return False
        old = self.out.with_name(f".{self.out.name}.old")
        if self.out.exists():
            self.out.rename(old)
        self.tmp.rename(self.out)
        shutil.rmtree(old, ignore_errors=True)
        return False


def _finish(tmp: Path, train_titles: Iterable[str], manifest: dict, vocab_size: int, rows: dict[str, int]) -> None:
    """labels.json, the tokenizer, and the manifest last: how the catalogue was made (``made_by``: the arguments
    that make it again) and every file's record (``rows``: each CSV part's, by its path in the catalogue)."""
    labels = categories() if manifest.get("labels") is None else manifest.pop("labels")
    (tmp / "train" / "labels.json").write_text(json.dumps(labels, ensure_ascii=False, indent=1), encoding="utf-8")
    train_tokenizer(train_titles, vocab_size).save(str(tmp / "train" / "tokenizer.json"))
    if manifest["seed"]:
        manifest["made_by"] += ["--seed", manifest["seed"]]
    if vocab_size != 8000:
        manifest["made_by"] += ["--vocab-size", vocab_size]
    written = sorted(p.relative_to(tmp).as_posix() for p in tmp.rglob("*") if p.is_file())
    manifest["files"] = {name: file_record(tmp / name, rows.get(name)) for name in written}
    (tmp / "manifest.json").write_text(json.dumps(manifest, ensure_ascii=False, indent=1), encoding="utf-8")


def build(out: str | os.PathLike, rows: int = 30000, seed: int = 0, vocab_size: int = 8000) -> Path:
    """Generate ``rows`` titles, split them, train the tokenizer and write a catalogue directory."""
    _check_request(out, vocab_size, rows)
    all_rows = list(generate_rows(rows, seed))
    return _write_split(
        out,
        all_rows,
        seed,
        vocab_size,
        {
            "source": "generator",
            "generator_version": GENERATOR_VERSION,
            "rows": rows,
            "seed": seed,
            "made_by": ["build", "--rows", rows],
        },
    )


def from_csv(src: str | os.PathLike, out: str | os.PathLike, seed: int = 0, vocab_size: int = 8000) -> Path:
    """Turn your own ``id,title,category`` CSV into a catalogue directory (validated before anything is written)."""
    _check_request(out, vocab_size)
    rows = read_rows(src)
    labels = sorted({r.category for r in rows})
    return _write_split(
        out,
        rows,
        seed,
        vocab_size,
        {"source": str(src), "rows": len(rows), "seed": seed, "labels": labels, "made_by": ["from-csv", str(src)]},
        source=str(src),
    )


def _write_split(out, rows, seed, vocab_size, manifest, source="the catalogue") -> Path:
    train, val = stratified_split(rows, VALIDATION_FRACTION, seed, source=source)  # fails before writing
    with _Staging(out) as tmp:
        counts = {
            name: write_rows(tmp / name, part)
            for name, part in (("train/part-00000.csv", train), ("validation/part-00000.csv", val))
        }
        manifest.update(
            train_rows=len(train),
            validation_rows=len(val),
            shards=1,
            class_counts=dict(sorted(Counter(r.category for r in rows).items())),
        )
        _finish(tmp, (r.title for r in train), manifest, vocab_size, counts)
    return Path(out)


def shards(
    out: str | os.PathLike,
    rows: int,
    n_shards: int = 8,
    seed: int = 0,
    vocab_size: int = 8000,
    tokenizer_rows: int = TOKENIZER_ROWS,
) -> Path:
    """A large catalogue written as shards, streamed (memory stays flat for millions of rows).

    The split is stratified within every shard: each category's every 10th row goes to validation. The tokenizer
    is trained on the first ``tokenizer_rows`` titles.
    """
    _check_request(out, vocab_size, rows)
    if n_shards < 1 or (n_shards - 1) * math.ceil(rows / n_shards) >= rows:  # else the last part has no rows
        raise CatalogError(
            f"{rows} rows cannot fill {n_shards} shard(s): every shard needs rows. Use fewer shards "
            f"or more rows (a shard of a few thousand rows or more is worth its file)."
        )
    per_shard = math.ceil(rows / n_shards)
    with _Staging(out) as tmp:
        counts: Counter = Counter()
        val_rows, written = 0, {}
        for s in range(n_shards):
            start, n = s * per_shard, min(per_shard, rows - s * per_shard)
            seen: Counter = Counter()
            train_part: list[Row] = []
            val_part: list[Row] = []
            for row in generate_rows(n, seed, start):
                seen[row.category] += 1
                (val_part if seen[row.category] % 10 == 0 else train_part).append(row)
            counts.update(seen)
            written[f"train/part-{s:05d}.csv"] = write_rows(tmp / "train" / f"part-{s:05d}.csv", train_part)
            written[f"validation/part-{s:05d}.csv"] = write_rows(tmp / "validation" / f"part-{s:05d}.csv", val_part)
            val_rows += written[f"validation/part-{s:05d}.csv"]
        titles = (r.title for r in generate_rows(min(rows, tokenizer_rows), seed, 0))
        _finish(
            tmp,
            titles,
            {
                "source": "generator",
                "generator_version": GENERATOR_VERSION,
                "rows": rows,
                "seed": seed,
                "shards": n_shards,
                "train_rows": rows - val_rows,
                "validation_rows": val_rows,
                "class_counts": dict(sorted(counts.items())),
                "made_by": ["shards", "--rows", rows, "--shards", n_shards]
                + (["--tokenizer-rows", tokenizer_rows] if tokenizer_rows != TOKENIZER_ROWS else []),
            },
            vocab_size,
            written,
        )
    return Path(out)


def _at_least(low: int):
    """An argparse type: a whole number of at least ``low``, refused with a usage error before anything runs."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
        if value < low:
            raise argparse.ArgumentTypeError(f"{value} is too small: use at least {low}")
        return value

    return parse


positive_int = _at_least(1)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m catalog_generator", description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("build", help="generate a small catalogue with one part per split")
    b.add_argument("--rows", type=positive_int, default=30000)
    s = sub.add_parser("shards", help="generate a large sharded catalogue")
    s.add_argument("--rows", type=positive_int, required=True)
    s.add_argument("--shards", type=positive_int, default=8)
    s.add_argument(
        "--tokenizer-rows", type=positive_int, default=TOKENIZER_ROWS, help="titles the tokenizer learns from"
    )
    c = sub.add_parser("from-csv", help="split and tokenize your own id,title,category CSV")
    c.add_argument("csv")
    v = sub.add_parser("check", help="verify a catalogue against its manifest (exit 1, saying what is wrong, if not)")
    v.add_argument("catalogue")
    for q in (b, s, c):
        q.add_argument("--out", required=True)
        q.add_argument("--seed", type=int, default=0)
        q.add_argument("--vocab-size", type=_at_least(MIN_VOCAB_SIZE), default=8000)
    a = p.parse_args(argv)
    if a.cmd == "check":
        try:
            verify_catalogue(a.catalogue)
        except CatalogError as e:
            raise SystemExit(f"{a.catalogue} does not verify: {e}") from None
        return
    try:
        if a.cmd == "build":
            out = build(a.out, a.rows, a.seed, a.vocab_size)
        elif a.cmd == "shards":
            out = shards(a.out, a.rows, a.shards, a.seed, a.vocab_size, a.tokenizer_rows)
        else:
            out = from_csv(a.csv, a.out, a.seed, a.vocab_size)
    except CatalogError as e:
        raise SystemExit(f"error: {e}") from None
    m = load_manifest(out)
    print(f"wrote {out}: {m['train_rows']} train + {m['validation_rows']} validation rows, {m['shards']} shard(s)")


if __name__ == "__main__":
    main()
