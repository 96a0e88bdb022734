"""Time the in-process engine against plain centralized training, and its memory against the client count.

Run ``python benchmarks/engine_speed.py``. Prints, measured in one run:

1. a FedAvg round (100 clients of mnist-5k, McMahan CNN, E=1, B=10, every client) against one
   centralized pass over the same 4,000 samples at B=10 -- target <= 1.10x;
2. an allreduce epoch with K=10 ranks at B=10 against a centralized pass at batch K*B=100 --
   target <= 1.15x;
3. the peak resident memory of a FedAvg round with 1,000 clients against one with 10 clients,
   each in a fresh process -- target <= 1.5x.

Engine times are `fedsim.engines.inprocess.run`'s training time (``wall_s - eval_s``); repeats
interleave engine and baseline and keep the best of each.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys

import numpy as np
import torch
from timing import best_times, centralized_epoch

from fedsim.client import get_state, set_state
from fedsim.config.run_config import RunConfig
from fedsim.data import load_dataset
from fedsim.engines.inprocess import run
from fedsim.build import build_model


def engine_training_seconds(config, data) -> float:
    """Return the training time of one run (evaluation excluded)."""
    summary = run(config, data=data).summary
    return summary["wall_s"] - summary["eval_s"]


def speed(data, repeats: int) -> None:
    fedavg = RunConfig(strategy="fedavg", model="cnn", partition="iid", num_partitions=100, batch_size=10, rounds=1)
    allreduce = RunConfig(strategy="allreduce", model="cnn", partition="iid", num_partitions=10, batch_size=10,
                          rounds=1)
    model = build_model(fedavg, data, torch.device("cpu"))
    initial = get_state(model)
    everything = np.arange(data.train_images.shape[0])

    def centralized(batch_size):
        set_state(model, initial)
        centralized_epoch(model, data, everything, batch_size, fedavg.lr)

    engine = {}
    jobs = {
        "fedavg round": lambda: engine.__setitem__("fedavg round", engine_training_seconds(fedavg, data)),
        "centralized B=10": lambda: centralized(10),
        "allreduce epoch": lambda: engine.__setitem__("allreduce epoch", engine_training_seconds(allreduce, data)),
        "centralized B=100": lambda: centralized(100),
    }
    for job in jobs.values():  # warm-up: first calls pay for kernel selection and allocation
        job()
    engine_best = {"fedavg round": float("inf"), "allreduce epoch": float("inf")}
    baseline = {"centralized B=10": float("inf"), "centralized B=100": float("inf")}
    for _ in range(repeats):
        wall = best_times(jobs, 1)
        for name in engine_best:
            engine_best[name] = min(engine_best[name], engine[name])
        for name in baseline:
            baseline[name] = min(baseline[name], wall[name])

    print(f"cnn on mnist-5k ({data.train_images.shape[0]} samples), torch threads={torch.get_num_threads()}, "
          f"best of {repeats}")
    rows = [("FedAvg round, 100 clients, E=1, B=10", "fedavg round", "centralized B=10", 1.10),
            ("allreduce epoch, K=10, B=10", "allreduce epoch", "centralized B=100", 1.15)]
    for label, mine, theirs, target in rows:
        ratio = engine_best[mine] / baseline[theirs]
        print(f"  {label:<38} {engine_best[mine]:7.3f} s   vs {theirs:<18} {baseline[theirs]:7.3f} s   "
              f"ratio {ratio:.3f} (target <= {target}: {'met' if ratio <= target else 'NOT met'})")


def peak_rss_child(num_clients: int) -> None:
    """Run one FedAvg round with ``num_clients`` IID clients of the CNN and print the peak RSS in MiB."""
    data = load_dataset("mnist-5k")
    config = RunConfig(strategy="fedavg", model="cnn", partition="iid", num_partitions=num_clients, batch_size=10,
                       rounds=1)
    run(config, data=data)
    print(json.dumps({"clients": num_clients, "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))


def memory() -> None:
    peaks = {}
    for clients in (10, 1000):
        output = subprocess.run([sys.executable, __file__, "--rss-child", str(clients)], capture_output=True,
                                text=True, check=True).stdout
        peaks[clients] = json.loads(output.strip().splitlines()[-1])["peak_rss_mib"]
    ratio = peaks[1000] / peaks[10]
    print(f"  peak RSS, FedAvg round: 10 clients {peaks[10]:.0f} MiB, 1,000 clients {peaks[1000]:.0f} MiB   "
          f"ratio {ratio:.3f} (target <= 1.5: {'met' if ratio <= 1.5 else 'NOT met'})")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--rss-child", type=int, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.rss_child is not None:
        peak_rss_child(args.rss_child)
        return
    speed(load_dataset("mnist-5k"), args.repeats)
    memory()


if __name__ == "__main__":
    main()
