"""quickstart: the model, the data and the training loop, as the quickstart's ``task.py`` has them.

The model and the data come from fedsim (the quickstart loads CIFAR-10 through flwr-datasets,
which needs the network): the McMahan CNN, and an IID share of mnist-5k per partition.
"""

from __future__ import annotations

import numpy as np
import torch
from torch.utils.data import DataLoader, TensorDataset

from fedsim.data import load_dataset, normalize
from fedsim.models import create_model

_DATA = None  # the quickstart caches its dataset per process too


def dataset():
    global _DATA
    if _DATA is None:
        _DATA = load_dataset("mnist-5k")
    return _DATA


def Net() -> torch.nn.Module:  # noqa: N802 (the quickstart's name)
    return create_model("cnn", num_classes=10, in_channels=1, image_size=28)


def load_data(partition_id: int, num_partitions: int, batch_size: int) -> DataLoader:
    data = dataset()
    shard = np.array_split(np.random.default_rng(42).permutation(len(data.train_labels)), num_partitions)[partition_id]
    images = normalize(data.train_images[shard], data)
    return DataLoader(TensorDataset(images, data.train_labels[shard]), batch_size=batch_size, shuffle=True)


def train(net, trainloader, epochs, lr, device) -> float:
    net.to(device)
    criterion = torch.nn.CrossEntropyLoss().to(device)
    optimizer = torch.optim.SGD(net.parameters(), lr=lr)
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
    data = dataset()
    images = normalize(data.test_images, data)
    net.to(device).eval()
    with torch.no_grad():
        outputs = net(images)
    loss = float(torch.nn.functional.cross_entropy(outputs, data.test_labels))
    return loss, float((outputs.argmax(1) == data.test_labels).float().mean())
