"""The global batch plan: the same rows at every step whatever the world size, resumable, optionally bucketed."""

from __future__ import annotations

import random

import pytest

from sampling import GlobalBatchPlan  # noqa: E402


def plan(world: int, rank: int, epoch: int = 0, start: int = 0, **kw) -> list[list[int]]:
    s = GlobalBatchPlan(1000, 32, world, rank, seed=3, **kw)
    s.set_epoch(epoch, start)
    return list(s)


@pytest.mark.parametrize("world", [2, 4])
def test_ranks_together_see_the_single_process_batches(world):
    single = plan(1, 0)
    shards = [plan(world, r) for r in range(world)]
    assert [sum((s[i] for s in shards), []) for i in range(len(single))] == single
    assert all(len(b) == 32 // world for s in shards for b in s)


def test_an_epoch_visits_distinct_rows_and_drops_only_the_last_partial_batch():
    rows = sum(plan(1, 0), [])
    assert len(rows) == len(set(rows)) == (1000 // 32) * 32


def test_epochs_differ_and_the_plan_is_deterministic():
    assert plan(1, 0, epoch=0) == plan(1, 0, epoch=0)
    assert plan(1, 0, epoch=0) != plan(1, 0, epoch=1)


def test_resuming_at_a_batch_yields_exactly_the_rest_of_the_epoch():
    full = plan(2, 1, epoch=2)
    assert plan(2, 1, epoch=2, start=7) == full[7:]


def test_length_buckets_cut_padding_and_keep_the_rows():
    rng = random.Random(0)
    lengths = [max(2, int(rng.lognormvariate(3.0, 0.5))) for _ in range(1000)]
    plain, bucketed = plan(1, 0), plan(1, 0, lengths=lengths, pool_batches=8)
    padded = lambda batches: sum(len(b) * max(lengths[i] for i in b) for b in batches)
    assert sorted(sum(bucketed, [])) == sorted(sum(plain, []))
    assert padded(bucketed) < 0.8 * padded(plain)


def test_a_global_batch_that_does_not_split_is_refused():
    with pytest.raises(ValueError, match="divide"):
        GlobalBatchPlan(100, 30, world=4, rank=0)
