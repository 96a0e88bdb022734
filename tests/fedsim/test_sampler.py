import pytest
import torch

import partitions
from fedsim.sampler import ShardSampler


@pytest.fixture
def partition():
    return partitions.dirichlet(torch.arange(300).remainder(5).numpy(), 3, 0.5, seed=0)


def test_yields_exactly_the_rank_shard_reshuffled_per_epoch(partition):
    sampler = ShardSampler(partition, rank=1, seed=4)
    first = list(sampler)
    assert sorted(first) == partition.shard(1).tolist()
    assert list(sampler) == first  # same epoch, same order
    sampler.set_epoch(1)
    second = list(sampler)
    assert sorted(second) == sorted(first) and second != first


def test_drop_last_truncates_every_rank_to_the_smallest_shard(partition):
    lengths = {len(list(ShardSampler(partition, rank, drop_last=True))) for rank in range(3)}
    assert lengths == {int(partition.sizes.min())}


def test_drop_in_for_a_dataloader(partition):
    dataset = torch.utils.data.TensorDataset(torch.arange(300))
    loader = torch.utils.data.DataLoader(dataset, batch_size=16, sampler=ShardSampler(partition, rank=0))
    seen = torch.cat([batch for (batch,) in loader])
    assert sorted(seen.tolist()) == partition.shard(0).tolist()


def test_bad_rank_and_partition(partition):
    with pytest.raises(ValueError, match="`rank`"):
        ShardSampler(partition, rank=3)
    with pytest.raises(TypeError, match="`partition`"):
        ShardSampler([[0, 1]], rank=0)
