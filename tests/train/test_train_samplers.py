import itertools

from layerscale.train.loop.samplers import EpochShardSampler, EvalShardSampler


def _batches(sampler, size):
    order = list(sampler)
    return [order[i:i + size] for i in range(0, len(order) - size + 1, size)]


def test_ranks_together_see_the_single_process_batches():
    single = EpochShardSampler(50, seed=3)
    ranks = [EpochShardSampler(50, seed=3, rank=r, world_size=2) for r in range(2)]
    for epoch in (0, 1):
        for s in (single, *ranks):
            s.set_epoch(epoch)
        global_batches = _batches(single, 8)
        per_rank = [_batches(r, 4) for r in ranks]
        for i, batch in enumerate(global_batches[: len(per_rank[0])]):
            assert sorted(batch) == sorted(per_rank[0][i] + per_rank[1][i])


def test_order_depends_on_seed_and_epoch_only_and_start_skips_exactly():
    a, b = EpochShardSampler(30, seed=1), EpochShardSampler(30, seed=1)
    a.set_epoch(2)
    b.set_epoch(2, start=12)
    assert list(a)[12:] == list(b) and len(b) == 18
    a.set_epoch(3)
    assert list(a) != list(b) and sorted(a) == list(range(30))


def test_eval_shards_cover_every_sample_once_with_equal_lengths():
    shards = [EvalShardSampler(11, r, 3) for r in range(3)]
    assert len({len(s) for s in shards}) == 1
    valid = list(itertools.chain.from_iterable(list(s)[: s.num_valid] for s in shards))
    assert sorted(valid) == list(range(11))
