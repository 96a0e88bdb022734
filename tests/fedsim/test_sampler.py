import pytest
import torch

import partitions
from fedsim.sampler import ShardSampler
from fedsim.schedule import RankSchedule


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


@pytest.mark.filterwarnings("ignore:`drop_last` keeps")
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


@pytest.mark.parametrize("batch_size", [7, 16])
def test_a_torchrun_rank_reads_the_in_process_ranks_batches(partition, batch_size):
    """A DataLoader over ShardSampler reads, step by step, the batches RankSchedule gives the rank."""
    schedule = RankSchedule(list(partition), batch_size, uneven="join", seed=5)
    dataset = torch.utils.data.TensorDataset(torch.arange(300))
    for rank in range(3):
        sampler = ShardSampler(partition, rank=rank, seed=5)
        loader = torch.utils.data.DataLoader(dataset, batch_size=batch_size, sampler=sampler)
        for epoch in range(3):
            sampler.set_epoch(epoch)
            expected = [schedule.batch(rank, epoch * schedule.steps_per_epoch + step)
                        for step in range(schedule.steps_per_epoch)]
            expected = [batch.tolist() for batch in expected if batch is not None]  # None: the rank has joined
            assert [batch.tolist() for (batch,) in loader] == expected


def test_indices_beyond_the_dataset_are_refused(partition):
    with pytest.raises(ValueError, match=r"`partition` holds index 29\d, beyond the 100 samples of `dataset`"):
        ShardSampler(partition, rank=0, dataset=torch.utils.data.TensorDataset(torch.arange(100)))
    ShardSampler(partition, rank=0, dataset=torch.utils.data.TensorDataset(torch.arange(300)))


def test_drop_last_warns_when_it_discards_most_of_a_shard():
    lopsided = partitions.Partition([list(range(0, 90)), list(range(90, 100))], num_samples=100, scheme="manual")
    with pytest.warns(UserWarning, match="keeps 10 of rank 0's 90 samples"):
        ShardSampler(lopsided, rank=0, drop_last=True)


def test_a_partition_that_does_not_match_the_world_size_is_refused(partition, tmp_path):
    import torch.distributed as dist

    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'rendezvous'}", rank=0, world_size=1)
    try:
        with pytest.raises(ValueError, match="3 partitions but the world size is 1"):
            ShardSampler(partition, rank=0)
    finally:
        dist.destroy_process_group()
