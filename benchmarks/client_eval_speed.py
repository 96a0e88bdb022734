"""Time the global model on every client's local test set against one central evaluation of as many samples.

Run ``python benchmarks/client_eval_speed.py``. McMahan et al.'s CNN on mnist-5k's 5,000
training images, split IID over 1,000 clients, each holding back a fifth as its local test set
(1,000 samples in all): (a) `fedsim.results.client_eval.evaluate_clients`, one batched pass
over the clients' test sets split by client afterwards; (b) `fedsim.client.evaluate` of the
same 1,000 samples as one central test set; (c) for scale, one `evaluate` per client, what
evaluating the clients one by one would cost. The target is a/b <= 1.2. Repeats interleave the
jobs and keep the best time of each, so that machine noise hits all alike.
"""

from __future__ import annotations

import argparse

import numpy as np
import torch
from timing import best_times

import partitions
from fedsim.client import evaluate
from fedsim.data import load_dataset
from fedsim.models import create_model
from fedsim.results.client_eval import evaluate_clients
from fedsim.client.tasks import create_task


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=1000)
    parser.add_argument("--local-test-fraction", type=float, default=0.2)
    parser.add_argument("--model", default="cnn")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args(argv)

    data = load_dataset("mnist-5k")
    task = create_task(data.num_classes)
    torch.manual_seed(0)
    model = create_model(args.model, num_classes=data.num_classes, in_channels=1, image_size=28)
    labels = data.train_labels.numpy()
    whole = partitions.iid(labels, args.clients, seed=0)
    local_test = partitions.split_local_test(whole, labels, args.local_test_fraction, seed=0).local_test
    together = np.concatenate(local_test)

    jobs = {
        "clients": lambda: evaluate_clients(model, None, data, task=task, local_test=local_test),
        "central": lambda: evaluate(model, None, data, task=task, split="train", indices=together),
        "one by one": lambda: [evaluate(model, None, data, task=task, split="train", indices=part)
                               for part in local_test],
    }
    jobs["central"]()  # warm up the kernels once before timing any
    best = best_times(jobs, args.repeats)

    print(f"{args.model} on mnist-5k, {args.clients} clients, {together.size} local test samples in all, "
          f"torch threads={torch.get_num_threads()}")
    print(f"  (a) every client, one batched pass    {best['clients']:7.3f} s")
    print(f"  (b) one central evaluation, same set  {best['central']:7.3f} s")
    print(f"  (c) one evaluation per client         {best['one by one']:7.3f} s")
    ratio = best["clients"] / best["central"]
    print(f"ratio a/b: {ratio:.3f} (target <= 1.2: {'met' if ratio <= 1.2 else 'NOT met'}); "
          f"c/b: {best['one by one'] / best['central']:.2f}")


if __name__ == "__main__":
    main()
