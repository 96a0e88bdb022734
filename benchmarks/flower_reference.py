"""A plain Flower 1.42 app, written as Flower's PyTorch quickstart writes one: the reference for flower_speed.py.

Run by ``flower_speed.py`` (``python benchmarks/flower_reference.py CLIENTS SAMPLED ROUNDS``). Each
client trains the same McMahan CNN on its IID share of mnist-5k for one epoch (B=10, SGD lr
0.05); the ``ServerApp`` runs Flower's ``FedAvg`` with ``Strategy.start`` and evaluates on the
server, on Flower's simulation engine with one CPU per client. The model and the data come from
fedsim (the quickstart loads CIFAR-10 through flwr-datasets, which needs the network); the loop,
the records and the strategy are the quickstart's.
"""

from __future__ import annotations

import json
import sys
import time

import numpy as np
import torch
from flwr.app import ArrayRecord, ConfigRecord, Context, Message, MetricRecord, RecordDict
from flwr.clientapp import ClientApp
from flwr.serverapp import Grid, ServerApp
from flwr.serverapp.strategy import FedAvg
from flwr.simulation import run_simulation
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


def load_data(partition_id: int, num_partitions: int) -> DataLoader:
    data = dataset()
    shard = np.array_split(np.random.default_rng(42).permutation(len(data.train_labels)), num_partitions)[partition_id]
    images = normalize(data.train_images[shard], data)
    return DataLoader(TensorDataset(images, data.train_labels[shard]), batch_size=10, shuffle=True)


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


client = ClientApp()


@client.train()
def client_train(msg: Message, context: Context) -> Message:
    model = Net()
    model.load_state_dict(msg.content["arrays"].to_torch_state_dict())
    trainloader = load_data(context.node_config["partition-id"], context.node_config["num-partitions"])
    train_loss = train(model, trainloader, 1, msg.content["config"]["lr"], "cpu")
    metrics = MetricRecord({"train_loss": train_loss, "num-examples": len(trainloader.dataset)})
    return Message(content=RecordDict({"arrays": ArrayRecord(model.state_dict()), "metrics": metrics}), reply_to=msg)


def server_app(clients: int, sampled: int, rounds: int, result: dict) -> ServerApp:
    server = ServerApp()

    @server.main()
    def main(grid: Grid, context: Context) -> None:
        torch.manual_seed(0)
        strategy = FedAvg(fraction_train=sampled / clients, fraction_evaluate=0.0, min_available_nodes=clients)

        def global_evaluate(server_round: int, arrays: ArrayRecord) -> MetricRecord:
            result.setdefault("evaluated_at", []).append(time.perf_counter())  # round 0: the initial model
            model = Net()
            model.load_state_dict(arrays.to_torch_state_dict())
            loss, accuracy = test(model, "cpu")
            result["accuracy"] = accuracy
            return MetricRecord({"accuracy": accuracy, "loss": loss})

        strategy.start(grid=grid, initial_arrays=ArrayRecord(Net().state_dict()), num_rounds=rounds,
                       train_config=ConfigRecord({"lr": 0.05}), evaluate_fn=global_evaluate)

    return server


if __name__ == "__main__":
    clients, sampled, rounds = (int(word) for word in sys.argv[1:4])
    result: dict = {}
    started = time.perf_counter()
    run_simulation(server_app=server_app(clients, sampled, rounds, result), client_app=client,
                   num_supernodes=clients, backend_config={"client_resources": {"num_cpus": 1, "num_gpus": 0.0}})
    evaluated_at = result.get("evaluated_at", [])
    round_s = [later - earlier for earlier, later in zip(evaluated_at, evaluated_at[1:])]
    print(json.dumps({"wall_s": time.perf_counter() - started, "accuracy": result.get("accuracy"), "round_s": round_s}))
