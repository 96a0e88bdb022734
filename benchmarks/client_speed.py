"""Time `client_update` over many small clients against one plain centralized pass.

Run ``python benchmarks/client_speed.py``. McMahan et al.'s CNN on mnist-5k: (a) 100 clients
of 40 samples each, batch 10, one local epoch, one after the other through `client_update`
(copy the global state in, train, read the delta out); (b) one epoch over the same 4,000
samples at batch 10 with a plain PyTorch training loop. The ratio a/b is the price of
simulating clients; the target is <= 1.10. Repeats interleave (a) and (b) and keep the best
time of each, so that machine noise hits both alike.
"""

from __future__ import annotations

import argparse

import numpy as np
import torch
from timing import best_times, centralized_epoch

import partitions
from fedsim.client import client_update, get_state, set_state
from fedsim.data import load_dataset
from fedsim.models import create_model
from fedsim.client.optim import OptimizerConfig
from fedsim.client.training import LocalTraining
from fedsim.client.tasks import create_task


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=100)
    parser.add_argument("--batch-size", type=int, default=10)
    parser.add_argument("--model", default="cnn")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)

    data = load_dataset("mnist-5k")
    task = create_task(data.num_classes)
    torch.manual_seed(0)
    model = create_model(args.model, num_classes=data.num_classes, in_channels=1, image_size=28)
    initial = get_state(model)
    partition = partitions.iid(data.train_labels.numpy(), args.clients, seed=0)
    everything = np.concatenate(list(partition))
    optimizer = OptimizerConfig(lr=0.05)
    training = LocalTraining(batch_size=args.batch_size, epochs=1, optimizer=optimizer)

    def simulate():
        for client, shard in enumerate(partition):
            client_update(model, initial, data, shard, task=task, training=training, client=client)

    def centralize():
        set_state(model, initial)
        centralized_epoch(model, data, everything, args.batch_size, optimizer.lr, seed=0)

    centralize()  # warm up the kernels once before timing either
    best = best_times({"clients": simulate, "centralized": centralize}, args.repeats)

    sizes = partition.sizes
    print(f"{args.model} on mnist-5k, {args.clients} clients x {sizes.min()}-{sizes.max()} samples, "
          f"B={args.batch_size}, 1 local epoch, torch threads={torch.get_num_threads()}")
    print(f"  (a) client_update over all clients   {best['clients']:7.3f} s")
    print(f"  (b) centralized pass, same samples    {best['centralized']:7.3f} s")
    ratio = best["clients"] / best["centralized"]
    print(f"ratio a/b: {ratio:.3f} (target <= 1.10: {'met' if ratio <= 1.10 else 'NOT met'})")


if __name__ == "__main__":
    main()
