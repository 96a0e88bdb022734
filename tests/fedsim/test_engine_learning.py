"""Learning happens, and the known Non-IID behaviour shows: FedAvg suffers under #C=1, allreduce does not."""

import pytest

from fedsim.config.run_config import RunConfig
from fedsim.engines.inprocess import run


def accuracy(mnist5k, **settings):
    config = RunConfig(**{"model": "mlp", "batch_size": 10, "lr": 0.05, "num_partitions": 10, **settings})
    return run(config, data=mnist5k).rows[-1]["test_accuracy"]


@pytest.mark.numerics
@pytest.mark.parametrize("strategy", ["allreduce", "reweighted", "fedavg"])
def test_each_strategy_learns_mnist5k_iid_in_two_rounds(mnist5k, strategy):
    assert accuracy(mnist5k, strategy=strategy, partition="iid", rounds=2) > 0.8


@pytest.mark.numerics
def test_one_class_per_client_hurts_fedavg_but_not_allreduce(mnist5k):
    one_class = {"partition": "pathological", "classes_per_partition": 1, "class_assignment_mode": "deterministic"}
    fedavg = {"strategy": "fedavg", "local_epochs": 3, "rounds": 1, "fraction": 1.0}
    # allreduce gets the same number of samples: three rounds of one epoch each
    allreduce = {"strategy": "allreduce", "rounds": 3}
    fedavg_iid = accuracy(mnist5k, partition="iid", **fedavg)
    fedavg_skewed = accuracy(mnist5k, **one_class, **fedavg)
    allreduce_iid = accuracy(mnist5k, partition="iid", **allreduce)
    allreduce_skewed = accuracy(mnist5k, **one_class, **allreduce)
    assert fedavg_skewed < fedavg_iid - 0.3
    assert allreduce_skewed > allreduce_iid - 0.05
