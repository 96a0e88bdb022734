import numpy as np
import pytest
import torch

from fedsim.aggregate import accumulate, class_balance_weights, cosine_to_mean, size_weights, softmax_weights, weighted_sum
from fedsim.schedule import RankSchedule, sample_clients

pytestmark = pytest.mark.numerics


def test_weighted_sum_equals_numpy_average():
    rng = np.random.default_rng(0)
    updates = [[rng.normal(size=(3, 4)), rng.normal(size=5)] for _ in range(6)]
    sizes = rng.integers(1, 100, 6)
    weights = size_weights(sizes)
    result = weighted_sum([[torch.from_numpy(t) for t in update] for update in updates], weights)
    for i in range(2):
        expected = np.average(np.stack([update[i] for update in updates]), axis=0, weights=sizes)
        np.testing.assert_allclose(result[i].numpy(), expected, rtol=1e-12)


@pytest.mark.parametrize(
    "counts", [[[30, 10, 0], [5, 5, 40]], [[50, 50, 0, 0], [0, 50, 50, 0], [0, 0, 50, 50], [50, 0, 0, 50]]],
    ids=["dirichlet-like", "two-classes-each"],
)
def test_class_balance_weights_make_the_sum_over_ranks_unbiased(counts):
    counts = np.array(counts)
    weights = class_balance_weights(counts).double().numpy()
    global_share = counts.sum(0) / counts.sum()
    local_share = counts / counts.sum(1, keepdims=True)
    # sum_k 1/K E_k[w_k(y) f(y)] = E_global[f(y)]: the equal-weight sum is the global gradient in expectation
    np.testing.assert_allclose((local_share * weights).sum(0) / len(counts), global_share)
    assert np.all(weights[counts == 0] == 0)


def test_accumulating_live_parameters_builds_no_graph():
    total = [torch.zeros(3)]
    accumulate(total, [torch.nn.Parameter(torch.ones(3))], 0.5)
    assert not total[0].requires_grad and total[0].grad_fn is None
    assert total[0].tolist() == [0.5] * 3


def test_class_balance_weights_are_plain_importance_weights_when_every_rank_holds_every_class():
    counts = np.array([[30, 10], [5, 45]])
    share = lambda c: c / c.sum()  # noqa: E731
    expected = share(counts.sum(0)) / np.stack([share(row) for row in counts])
    np.testing.assert_allclose(class_balance_weights(counts).double().numpy(), expected, rtol=1e-6)


def test_softmax_and_cosine_rules():
    assert softmax_weights([1.0, 1.0, 1.0], 0.5).tolist() == pytest.approx([1 / 3] * 3)
    sharp, flat = softmax_weights([0.0, 1.0], 0.1), softmax_weights([0.0, 1.0], 10.0)
    assert sharp[1] > flat[1] > 0.5
    same = [torch.ones(3)]
    opposite = [-torch.ones(3)]
    scores = cosine_to_mean([same, same, opposite])
    assert scores[0] == pytest.approx(1.0) and scores[2] == pytest.approx(-1.0)


def test_client_sampling_is_seeded_by_round():
    first = sample_clients(100, 0.1, seed=0, round_index=3)
    assert first.tolist() == sample_clients(100, 0.1, seed=0, round_index=3).tolist()
    assert first.tolist() != sample_clients(100, 0.1, seed=0, round_index=4).tolist()
    assert len(first) == 10 and len(set(first.tolist())) == 10
    assert sample_clients(5, 0.01, 0, 0).size == 1


@pytest.mark.parametrize("uneven", ["join", "cycle"])
def test_rank_schedule_epochs(uneven):
    shards = [np.arange(0, 25), np.arange(25, 35)]  # 3 and 1 batches of 10
    schedule = RankSchedule(shards, batch_size=10, uneven=uneven, seed=0)
    assert schedule.steps_per_epoch == 3
    epoch = [schedule.batches(step) for step in range(3)]
    assert sorted(torch.cat([b[0] for b in epoch]).tolist()) == list(range(25))
    if uneven == "join":
        assert epoch[1][1] is None and epoch[2][1] is None
    else:
        assert all(len(b[1]) == 10 for b in epoch)
    assert [b.tolist() for b in schedule.batches(1) if b is not None] == [
        b.tolist() for b in RankSchedule(shards, 10, uneven, 0).batches(1) if b is not None
    ]  # a function of the step alone
    assert not torch.equal(schedule.batches(0)[0], schedule.batches(3)[0])  # reshuffled next epoch
