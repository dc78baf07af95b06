"""A deterministic generator of e-commerce product titles: the rows of the synthetic catalogue, as a marketplace feed
writes them (the module docstring of :mod:`catalog_generator.catalog` says what they imitate). The same seed gives the
same rows on every machine. :mod:`catalog_generator.catalog` writes them as a catalogue directory.
"""

from __future__ import annotations

import bisect
import itertools
import math
import random
from collections import defaultdict
from collections.abc import Iterable, Iterator

from catalog_generator.taxonomy import ATTRIBUTES, BRANDS, LEAVES, PROMO_TAGS, STYLE_WORDS, Leaf
from helpers.data.catalog_files import CatalogError, Row, load_manifest

GENERATOR_VERSION = 2  # 2: titles that name a second product as a modifier (COMPOUND_RATE)
MISLABEL_RATE = 0.025  # rows whose category is simply wrong
AMBIGUOUS_RATE = 0.015  # rows whose title names no product at all
TYPO_RATE = 0.04
# Titles that name a second product as a modifier of their own ("니트 원피스", "dress shoes", "organizer for socks"):
# the head noun decides the category, and where the head sits depends on the phrase, so word order matters.
COMPOUND_RATE = 0.25
HOLDERS = ("life > storage > organizer", "fashion > bags > tote", "fashion > bags > backpack")  # "for" anything
LANG_WEIGHTS = {"ko": 0.55, "en": 0.2, "mixed": 0.25}


def categories() -> list[str]:
    """Every leaf category path, in label-index order."""
    return [leaf.path for leaf in LEAVES]


class TitleGenerator:
    """Makes rows for one stream; the same seed gives the same rows on every machine."""

    def __init__(self, seed: int):
        self.rng = random.Random(seed)
        self.compounds = 0  # titles made with a modifier from another leaf
        self._cum_weights = list(itertools.accumulate(leaf.weight for leaf in LEAVES))
        self._by_vertical: dict[str, list[Leaf]] = defaultdict(list)
        for leaf in LEAVES:
            self._by_vertical[leaf.vertical].append(leaf)

    def _pick_leaf(self) -> Leaf:
        x = self.rng.random() * self._cum_weights[-1]
        return LEAVES[bisect.bisect_right(self._cum_weights, x)]

    def _lang(self) -> str:
        return self.rng.choices(list(LANG_WEIGHTS), weights=list(LANG_WEIGHTS.values()))[0]

    def _say(self, pair: tuple[str, str], lang: str) -> str:
        if lang == "mixed":
            return pair[self.rng.random() < 0.4]
        return pair[lang == "en"]

    def title(self, leaf: Leaf) -> str:
        rng, lang = self.rng, self._lang()
        words: list[str] = []
        # promo tags lead the title, as sellers put them where the eye lands first
        words += rng.sample(PROMO_TAGS, k=min(len(PROMO_TAGS), _geometric(rng, 0.55)))
        if rng.random() < 0.6:
            brands = BRANDS[leaf.vertical]
            brand = brands[rng.randrange(len(brands))]
            words.append(brand if lang != "ko" or rng.random() < 0.3 else f"[{brand}]")
        # the long tail of keyword stuffing: lognormal word count, mostly 1-3 extra words
        extra = min(16, int(rng.lognormvariate(1.15, 0.7)))
        pool = [(kind, pair) for kind in leaf.attrs for pair in ATTRIBUTES[kind]]
        for kind, pair in rng.sample(pool, k=min(len(pool), max(0, extra - 1))):
            words.append(self._say(pair, lang))
        if rng.random() < 0.35:
            words.append(self._say(STYLE_WORDS[rng.randrange(len(STYLE_WORDS))], lang))
        head = self._noun(leaf, lang)
        words += self._compound(leaf, head).split() if rng.random() < COMPOUND_RATE else [head]
        if extra > 6 and rng.random() < 0.5:  # stuffed titles repeat the noun in the other language
            words.append(self._noun(leaf, "en" if lang == "ko" else "ko"))
        title = " ".join(words)
        return _typo(rng, title) if rng.random() < TYPO_RATE else title

    def _compound(self, leaf: Leaf, head: str) -> str:
        """The head noun with another leaf's noun as its modifier, in the head's language: Korean puts the head
        last ("B A", "B용 A"); English too ("B A"), unless it says "A for B"."""
        rng = self.rng
        pool = LEAVES if leaf.path in HOLDERS and rng.random() < 0.5 else self._by_vertical[leaf.vertical]
        other = rng.choice([n for n in pool if n is not leaf])
        english = head in leaf.en
        modifier = rng.choice(other.en if english else other.ko)
        self.compounds += 1
        if english:
            return f"{head} for {modifier}" if rng.random() < 0.4 else f"{modifier} {head}"
        return f"{modifier}용 {head}" if rng.random() < 0.2 else f"{modifier} {head}"

    def _noun(self, leaf: Leaf, lang: str) -> str:
        if leaf.confusable and self.rng.random() < 0.12:
            return self.rng.choice(leaf.confusable)
        if lang == "mixed":
            lang = "en" if self.rng.random() < 0.35 else "ko"
        nouns = leaf.en if lang == "en" else leaf.ko
        return nouns[self.rng.randrange(len(nouns))]

    def row(self, index: int) -> Row:
        leaf = self._pick_leaf()
        title = self.title(leaf)
        if self.rng.random() < AMBIGUOUS_RATE:  # a title with no product noun: tags, brand, colour only
            title = " ".join(w for w in title.split() if not _names_a_product(w)) or title
        category = leaf.path
        if self.rng.random() < MISLABEL_RATE:
            neighbours = self._by_vertical[leaf.vertical] if self.rng.random() < 0.7 else LEAVES
            category = self.rng.choice([n for n in neighbours if n is not leaf]).path
        return Row(f"p{index:08d}", title, category)


_NOUNS = {noun for leaf in LEAVES for noun in (*leaf.ko, *leaf.en, *leaf.confusable) if " " not in noun}


def _names_a_product(word: str) -> bool:
    return word in _NOUNS


def _geometric(rng: random.Random, p_more: float) -> int:
    n = 0
    while rng.random() < p_more and n < 4:
        n += 1
    return n if rng.random() < 0.6 else 0


def _typo(rng: random.Random, title: str) -> str:
    if len(title) < 4:
        return title
    i = rng.randrange(1, len(title) - 2)
    kind = rng.randrange(3)
    if kind == 0:  # dropped character
        return title[:i] + title[i + 1 :]
    if kind == 1:  # swapped neighbours
        return title[:i] + title[i + 1] + title[i] + title[i + 2 :]
    return title[:i] + title[i] + title[i:]  # doubled character


def generate_rows(n: int, seed: int = 0, start: int = 0) -> Iterator[Row]:
    """``n`` rows with ids ``start`` … ``start + n - 1``; deterministic in ``(seed, start)``."""
    gen = TitleGenerator(seed * 1_000_003 + start)
    for i in range(start, start + n):
        yield gen.row(i)


def modifier_ids(catalog_dir, rows: Iterable[Row]) -> set[str]:
    """The ids among ``rows`` whose title names a second product as a modifier of its own ("니트 원피스",
    "organizer for socks"): the generator counts each such title as it makes it, so replaying it with the
    catalogue's seed marks them exactly (about a second for 30,000 rows). Each given row is checked against the
    replay; a catalogue the generator did not make (``from-csv``) has no such record and is refused."""
    manifest = load_manifest(catalog_dir)
    if manifest.get("source") != "generator" or manifest.get("generator_version") != GENERATOR_VERSION:
        raise CatalogError(
            f"{catalog_dir}: the slice of titles with a modifier is known only for a catalogue this generator "
            f"(version {GENERATOR_VERSION}) made; this one's manifest says source={manifest.get('source')!r}, "
            f"generator_version={manifest.get('generator_version')!r}. Rebuild it with "
            f"`python -m catalog_generator build`."
        )
    wanted = {r.id: r for r in rows}
    total, shards = manifest["rows"], manifest.get("shards", 1)
    per_shard = math.ceil(total / shards)
    found: set[str] = set()
    for start in range(0, total, per_shard):  # generate_rows' streams: one per shard, seeded by its first row
        gen = TitleGenerator(manifest["seed"] * 1_000_003 + start)
        for i in range(start, min(start + per_shard, total)):
            before = gen.compounds
            row = gen.row(i)
            if row.id in wanted:
                if wanted[row.id] != row:
                    raise CatalogError(
                        f"{catalog_dir}: row {row.id} is {wanted[row.id]}, but the generator makes {row}: the "
                        "catalogue was edited after it was built; rebuild it with "
                        "`python -m catalog_generator build`."
                    )
                if gen.compounds > before:
                    found.add(row.id)
    return found
