"""Measure ``--sample-seconds``: the seconds one training sample costs a client at speed 1.

Run ``python benchmarks/sample_seconds.py [--model cnn] [--dataset mnist-5k] [--batch-size 10]``.
It times plain training epochs (shuffle, forward, backward, SGD step) of the model over the
dataset's training samples at the batch size, keeps the best of ``--repeats``, and prints the
time per sample: the number a run's simulated clock takes as ``--sample-seconds``, so that a
client at speed 1 is this machine (`fedsim.rounds.clock`). fedsim's default is this script's
number for McMahan et al.'s CNN on mnist-5k at batch 10, on the machine the Time tutorial
(docs/tutorials/time.md) names.
"""

from __future__ import annotations

import argparse

import numpy as np
import torch
from timing import best_times, centralized_epoch

from fedsim.client import get_state, set_state
from fedsim.data import load_dataset
from fedsim.models import create_model


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="cnn")
    parser.add_argument("--dataset", default="mnist-5k")
    parser.add_argument("--batch-size", type=int, default=10)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)

    data = load_dataset(args.dataset)
    torch.manual_seed(0)
    model = create_model(args.model, num_classes=data.num_classes, in_channels=data.in_channels,
                         image_size=data.image_size)
    initial = get_state(model)
    samples = np.arange(len(data.train_labels))

    def epoch():
        set_state(model, initial)
        centralized_epoch(model, data, samples, args.batch_size, lr=0.05, seed=0)

    epoch()  # warm the kernels up before timing
    best = best_times({"epoch": epoch}, args.repeats)["epoch"]
    print(f"{args.model} on {args.dataset}, {len(samples)} samples at B={args.batch_size}, "
          f"torch threads={torch.get_num_threads()}: best epoch {best:.3f} s")
    print(f"--sample-seconds {best / len(samples):.2e}")


if __name__ == "__main__":
    main()
