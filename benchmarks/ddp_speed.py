"""Time real DDP against the in-process engine, with and without gradient compression.

Run ``python benchmarks/ddp_speed.py``. Prints, measured in one run, the training samples/s of
``allreduce`` with the McMahan CNN on mnist-5k split IID over 2 ranks, and the ratio of each to (a):

(a) the in-process engine, 2 ranks in one process (all the machine's threads);
(b) ``fedsim ddp --nproc 2``: torchrun, 2 processes x (cores / 2) threads, gloo (nccl on a GPU);
(c) (b) with PyTorch's fp16 compress hook;
(d) (b) with PowerSGD, rank 2;

and the bytes one rank sends per step in each. Goal: (b) >= 0.9x (a) on 2 cores. With a GPU
(``--device auto`` finds it) the ranks use nccl and the numbers are images/s on the GPU.

Throughput is taken from the end of round 1 to the end of the round before the last, so start-up,
the first round's warm-up and the evaluation after the last round are left out; the jobs are interleaved
and the best of ``--repeats`` kept.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import torch

from fedsim.build import build_model
from fedsim.comm.compression import wire_bytes
from fedsim.config.run_config import RunConfig
from fedsim.data import load_dataset
from fedsim.engines.inprocess import run
from fedsim.results.folder import read_rows


def steady_samples_per_second(rows: list[dict]) -> float:
    """Return the samples/s from the end of round 1 to the end of the round before the last (which evaluates)."""
    first, last = rows[0], rows[-2]
    return (last["samples_seen"] - first["samples_seen"]) / (last["wall_s"] - first["wall_s"])


def in_process(settings: dict, data) -> float:
    return steady_samples_per_second(run(RunConfig(**settings), data=data).rows)


def distributed(settings: dict, folder: Path) -> float:
    """Run ``fedsim ddp --nproc 2`` with ``settings`` and return its samples/s."""
    flags = []
    for key, value in settings.items():
        flags += [f"--{key.replace('_', '-')}", str(value)]
    out = folder / f"run-{len(list(folder.iterdir()))}"
    command = [sys.executable, "-m", "fedsim", "ddp", "--nproc", "2", *flags, "--quiet", "--out", str(out)]
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
    return steady_samples_per_second(read_rows(out / "metrics.csv"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--batch-size", type=int, default=64, help="samples per rank per step (default 64)")
    parser.add_argument("--rounds", type=int, default=4, help="rounds per run, each one pass over the data, >= 3 "
                        "(default 4)")
    parser.add_argument("--repeats", type=int, default=2, help="interleaved repeats, best kept (default 2)")
    parser.add_argument("--model", default="cnn")
    parser.add_argument("--device", default="auto", help="cpu, cuda or auto (default auto)")
    args = parser.parse_args()
    if args.rounds < 3:
        parser.error(f"--rounds must be at least 3 (round 1 warms up, the last evaluates), got {args.rounds}")

    settings = {"strategy": "allreduce", "model": args.model, "dataset": "mnist-5k", "partition": "iid",
                "num_partitions": 2, "batch_size": args.batch_size, "rounds": args.rounds,
                "eval_every": args.rounds, "device": args.device}
    jobs = {"(a) in-process, 2 ranks": ("in-process", {}),
            "(b) DDP, 2 processes": ("ddp", {}),
            "(c) (b) + fp16 compression": ("ddp", {"compression": "fp16"}),
            "(d) (b) + PowerSGD rank 2": ("ddp", {"compression": "powersgd"})}
    data = load_dataset("mnist-5k")
    best = dict.fromkeys(jobs, 0.0)
    with tempfile.TemporaryDirectory() as folder:
        for _ in range(args.repeats):
            for name, (engine, extra) in jobs.items():
                job_settings = {**settings, **extra}
                rate = in_process(job_settings, data) if engine == "in-process" else distributed(job_settings,
                                                                                                   Path(folder))
                best[name] = max(best[name], rate)

    params = [p for p in build_model(RunConfig(**settings), data).parameters()]
    device = "cuda" if args.device != "cpu" and torch.cuda.is_available() else "cpu"
    print(f"allreduce, {args.model} on mnist-5k, IID over 2 ranks, B={args.batch_size} per rank, {device}")
    print(f"{'job':<30} {'samples/s':>10} {'vs (a)':>7} {'bytes/step/rank':>16}")
    results = {}
    for name, (_, extra) in jobs.items():
        sent = wire_bytes(params, extra.get("compression", "none"), steps_taken=10)
        ratio = best[name] / best["(a) in-process, 2 ranks"]
        print(f"{name:<30} {best[name]:>10,.0f} {ratio:>6.2f}x {sent:>16,}")
        results[name] = {"samples_per_s": best[name], "ratio_to_a": ratio, "bytes_per_step_per_rank": sent}
    print(json.dumps(results))


if __name__ == "__main__":
    main()
