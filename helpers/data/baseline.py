"""A cheap baseline next to the transformer: TF-IDF over character n-grams and a linear classifier; and the two side
by side on the slice where word order decides.

Character n-grams survive Korean compounds ("셔츠원피스") and typos. But a bag of them cannot tell a head noun from its
modifier ("니트 원피스" is a dress, "dress shoes" are shoes): the generator's own record of them
(:func:`catalog_generator.titles.modifier_ids`) finds those titles, :func:`predict` reads a trained job's model back,
and :func:`by_slice` scores both classifiers on them and on the rest.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from helpers.data.catalog_files import Row, load_split


@dataclass
class BaselineResult:
    accuracy: float
    macro_f1: float
    train_rows: int
    validation_rows: int
    seconds: float
    predictions: list[str] = field(default_factory=list, repr=False)  # a category per validation row, in order

    def as_row(self) -> dict:
        return {
            "model": "TF-IDF + linear (baseline)",
            "val_accuracy": self.accuracy,
            "val_macro_f1": self.macro_f1,
            "train_rows": self.train_rows,
            "seconds": round(self.seconds, 1),
        }


def tfidf_baseline(catalog_dir, max_train_rows: int | None = None, seed: int = 0) -> BaselineResult:
    """Fit on the catalogue's training split (or its first ``max_train_rows``) and score its validation split.

    The linear classifier stops once an epoch no longer improves its loss (scikit-learn's default tolerance), which
    it reaches within its 100 epochs at any size: on the whole catalogue a few seconds of one core, and as good as a
    fixed 30 epochs."""
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.linear_model import SGDClassifier
    from sklearn.metrics import accuracy_score, f1_score

    start = time.perf_counter()
    train, val, labels = load_split(catalog_dir)
    train = train[:max_train_rows] if max_train_rows else train
    vec = TfidfVectorizer(analyzer="char_wb", ngram_range=(1, 3), sublinear_tf=True, lowercase=True, min_df=2)
    x_train = vec.fit_transform([r.title for r in train])
    clf = SGDClassifier(loss="modified_huber", alpha=2e-5, max_iter=100, tol=1e-3, random_state=seed)
    clf.fit(x_train, [r.category for r in train])
    pred = [str(p) for p in clf.predict(vec.transform([r.title for r in val]))]
    truth = [r.category for r in val]
    return BaselineResult(
        accuracy_score(truth, pred),
        f1_score(truth, pred, average="macro", labels=labels, zero_division=0),
        len(train),
        len(val),
        time.perf_counter() - start,
        pred,
    )


def predict(model_dir, titles: Sequence[str], max_length: int, batch_size: int = 256) -> list[str]:
    """The category a job's saved model (``save_pretrained`` plus ``tokenizer.json`` and ``labels.json``, as
    ``train.py`` writes them) gives each title, on this machine's CPU. ``max_length`` is the job's: titles are cut
    where training cut them."""
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer, PreTrainedTokenizerFast
    from transformers.utils import logging as hf_logging

    model_dir = Path(model_dir)
    labels = json.loads((model_dir / "labels.json").read_text(encoding="utf-8"))
    if (model_dir / "tokenizer_config.json").is_file():  # a Hub model's own tokenizer, saved beside it
        tokenizer = AutoTokenizer.from_pretrained(model_dir)
    else:  # the catalogue's WordPiece file, as train.py loads it
        tokenizer = PreTrainedTokenizerFast(
            tokenizer_file=str(model_dir / "tokenizer.json"),
            pad_token="[PAD]",
            unk_token="[UNK]",
            cls_token="[CLS]",
            sep_token="[SEP]",
            mask_token="[MASK]",
        )
    hf_logging.disable_progress_bar()
    model = AutoModelForSequenceClassification.from_pretrained(model_dir).eval()
    out: list[str] = []
    with torch.inference_mode():
        for i in range(0, len(titles), batch_size):
            batch = tokenizer(
                list(titles[i : i + batch_size]),
                truncation=True,
                max_length=max_length,
                padding=True,
                return_tensors="pt",
                return_token_type_ids=False,
            )
            out += [labels[k] for k in model(**batch).logits.argmax(-1).tolist()]
    return out


def by_slice(
    rows: Sequence[Row], predictions: dict[str, Sequence[str]], in_slice: set[str], labels: Sequence[str]
) -> list[dict]:
    """Accuracy and macro-F1 of each classifier (``predictions``: name -> a category per row) on the titles whose
    modifier names a second product (ids in ``in_slice``), on the others, and on all: rows for a table."""
    from sklearn.metrics import f1_score

    parts = {
        "modifier names a second product": [i for i, r in enumerate(rows) if r.id in in_slice],
        "the other titles": [i for i, r in enumerate(rows) if r.id not in in_slice],
        "all validation titles": list(range(len(rows))),
    }
    table = []
    for name, picked in parts.items():
        truth = [rows[i].category for i in picked]
        row: dict = {"titles": name, "rows": len(picked)}
        for model, pred in predictions.items():
            mine = [pred[i] for i in picked]
            row[f"{model} accuracy"] = sum(p == t for p, t in zip(mine, truth)) / max(len(picked), 1)
        for model, pred in predictions.items():
            mine = [pred[i] for i in picked]
            present = sorted(set(truth))  # a slice need not hold every category: score those it holds
            row[f"{model} macro-F1"] = float(
                f1_score(truth, mine, average="macro", labels=present or list(labels), zero_division=0)
            )
        table.append(row)
    return table


def saved_model_by_slice(
    model_dir, base: BaselineResult, rows: Sequence[Row], in_slice: set[str], labels: Sequence[str], max_length: int
) -> list[dict]:
    """:func:`by_slice` for the model a job saved (read back from its model directory) beside the baseline."""
    predicted = predict(model_dir, [r.title for r in rows], max_length)
    return by_slice(rows, {"baseline": base.predictions, "network": predicted}, in_slice, labels)


def slice_figures(scored: list[dict]) -> dict:
    """The figures of :func:`saved_model_by_slice`'s three rows, named for a lab's sentence and its claims."""
    on, off, every = scored
    return {
        "slice_titles": on["rows"],
        "network_slice_accuracy": on["network accuracy"],
        "baseline_slice_accuracy": on["baseline accuracy"],
        "other_titles": off["rows"],
        "network_other_accuracy": off["network accuracy"],
        "baseline_other_accuracy": off["baseline accuracy"],
        "saved_model_macro_f1": every["network macro-F1"],  # read back: the job's own figure, again
    }
