"""A cheap baseline next to the transformer: TF-IDF over character n-grams and a linear classifier.

Character n-grams suit the titles: Korean nouns glue onto each other ("셔츠원피스") and typos break whole words, but
most n-grams survive both. If the network cannot beat this, it has not learned anything a bag of n-grams could not.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from helpers.data.catalog import load_split


@dataclass
class BaselineResult:
    accuracy: float
    macro_f1: float
    train_rows: int
    validation_rows: int
    seconds: float

    def as_row(self) -> dict:
        return {
            "model": "TF-IDF + linear (baseline)",
            "val_accuracy": self.accuracy,
            "val_macro_f1": self.macro_f1,
            "train_rows": self.train_rows,
            "seconds": round(self.seconds, 1),
        }


def tfidf_baseline(catalog_dir, max_train_rows: int | None = None, seed: int = 0) -> BaselineResult:
    """Fit on the catalogue's training split (or its first ``max_train_rows``) and score its validation split."""
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.linear_model import SGDClassifier
    from sklearn.metrics import accuracy_score, f1_score

    start = time.perf_counter()
    train, val, labels = load_split(catalog_dir)
    train = train[:max_train_rows] if max_train_rows else train
    vec = TfidfVectorizer(analyzer="char_wb", ngram_range=(1, 3), sublinear_tf=True, lowercase=True, min_df=2)
    x_train = vec.fit_transform([r.title for r in train])
    clf = SGDClassifier(loss="modified_huber", alpha=2e-5, max_iter=30, tol=None, random_state=seed)
    clf.fit(x_train, [r.category for r in train])
    pred = clf.predict(vec.transform([r.title for r in val]))
    truth = [r.category for r in val]
    return BaselineResult(
        accuracy_score(truth, pred),
        f1_score(truth, pred, average="macro", labels=labels, zero_division=0),
        len(train),
        len(val),
        time.perf_counter() - start,
    )
