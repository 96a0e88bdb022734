"""quickstart: the model, the data and the training loop, as the quickstart's ``task.py`` has them.

Two things differ from the plain quickstart (``benchmarks/quickstart_app``), so that the app's
numbers are fedsim's own and a test can compare them with ``fedsim flower simulate`` in
float64: the model, the partition and the data are those of a fedsim run of the settings
below (`fedsim.build.RunSetup`), and each client reads its batches in the order fedsim's client
core draws them (seeded by the seed, the round and the partition). Your own app keeps its own.
"""

from __future__ import annotations

import functools

import torch
from torch.utils.data import DataLoader, TensorDataset

from fedsim import RunConfig
from fedsim.build import RunSetup, build_model
from fedsim.data import normalize
from fedsim.seeding import Stream, torch_generator

#: The fedsim run whose data, partition and model the app uses: `fedsim flower simulate` of these settings
#: (and the app's method) gives the app's model.
SETTINGS = {"dataset": "digits", "model": "mlp", "partition": "dirichlet", "alpha": 0.5, "dtype": "float64"}


@functools.lru_cache(maxsize=2)
def setup(num_partitions: int) -> RunSetup:
    """The run's data, partition and seeded model, built once per process."""
    return RunSetup.build(RunConfig(**SETTINGS, num_partitions=num_partitions))


def Net() -> torch.nn.Module:  # noqa: N802 (the quickstart's name)
    config = RunConfig(**SETTINGS)
    return build_model(config, config.load_dataset())


class FedsimOrder:
    """A batch sampler of a client's shard in fedsim's order: a permutation from fedsim's seeded stream each pass."""

    def __init__(self, size: int, batch_size: int, generator: torch.Generator):
        self.size, self.batch_size, self.generator = size, batch_size, generator

    def __iter__(self):
        order = torch.randperm(self.size, generator=self.generator).tolist()
        return iter([order[start : start + self.batch_size] for start in range(0, self.size, self.batch_size)])

    def __len__(self):
        return -(-self.size // self.batch_size)


def load_data(partition_id: int, num_partitions: int, batch_size: int, server_round: int) -> DataLoader:
    run = setup(num_partitions)
    shard = torch.as_tensor(run.partition.shard(partition_id))
    images = normalize(run.data.train_images[shard], run.data, dtype=torch.float64)
    generator = torch_generator(0, Stream.CLIENT_DATA, server_round - 1, partition_id)  # fedsim's: seed 0, 0-based round
    order = FedsimOrder(len(shard), batch_size, generator)
    return DataLoader(TensorDataset(images, run.data.train_labels[shard]), batch_sampler=order)


def train(net, trainloader, epochs, lr, device, method) -> float:
    net.to(device)
    criterion = torch.nn.CrossEntropyLoss().to(device)
    optimizer = method.wrap(torch.optim.SGD(net.parameters(), lr=lr))
    net.train()
    running_loss = 0.0
    for _ in range(epochs):
        for images, labels in trainloader:
            optimizer.zero_grad()
            loss = criterion(net(images.to(device)), labels.to(device))
            loss.backward()
            optimizer.step()
            running_loss += loss.item()
    return running_loss / (epochs * len(trainloader))


def test(net, device) -> tuple[float, float]:
    data = RunConfig(**SETTINGS).load_dataset()
    images = normalize(data.test_images, data, dtype=torch.float64)
    net.to(device).eval()
    with torch.no_grad():
        outputs = net(images)
    loss = float(torch.nn.functional.cross_entropy(outputs, data.test_labels))
    return loss, float((outputs.argmax(1) == data.test_labels).float().mean())
