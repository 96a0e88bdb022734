"""Time the partitioners at scale, and fedsim's Dirichlet against a per-class Python loop.

Run ``python benchmarks/partition_speed.py``. The reference is NIID-Bench's ``noniid-labeldir``
loop (Li et al., ICDE 2022) as published: a Python loop over classes that grows Python lists,
with its balance step, retried until the smallest partition is large enough. fedsim's
`partitions.dirichlet` with ``self_balancing=True`` implements the same draw. Times are the best
of ``--repeats`` runs, fedsim and reference interleaved so that machine noise hits both alike.
"""

from __future__ import annotations

import argparse

import numpy as np
from timing import best_times

import partitions


def niid_bench_dirichlet(labels, num_partitions, alpha, min_partition_size, rng):
    """NIID-Bench's ``noniid-labeldir`` partitioning, kept as published (global RNG replaced by ``rng``)."""
    num_classes, n = int(labels.max()) + 1, labels.size
    min_size, tries = 0, 0
    while min_size < min_partition_size:
        tries += 1
        idx_batch = [[] for _ in range(num_partitions)]
        for k in range(num_classes):
            idx_k = np.where(labels == k)[0]
            rng.shuffle(idx_k)
            proportions = rng.dirichlet(np.repeat(alpha, num_partitions))
            proportions = np.array([p * (len(idx_j) < n / num_partitions) for p, idx_j in zip(proportions, idx_batch)])
            proportions = proportions / proportions.sum()
            proportions = (np.cumsum(proportions) * len(idx_k)).astype(int)[:-1]
            idx_batch = [idx_j + idx.tolist() for idx_j, idx in zip(idx_batch, np.split(idx_k, proportions))]
            min_size = min(len(idx_j) for idx_j in idx_batch)
    return idx_batch, tries


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=1_000_000)
    parser.add_argument("--classes", type=int, default=100)
    parser.add_argument("--partitions", type=int, default=1000)
    parser.add_argument("--alpha", type=float, default=0.1)
    parser.add_argument("--min-partition-size", type=int, default=10)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)

    labels = np.random.default_rng(0).integers(0, args.classes, args.samples)
    k, alpha, min_size = args.partitions, args.alpha, args.min_partition_size
    print(f"{args.samples:,} labels, {args.classes} classes -> {k} partitions (alpha={alpha}, min size {min_size})")

    jobs = {
        "dirichlet": lambda: partitions.dirichlet(labels, k, alpha, min_partition_size=min_size, seed=0),
        "dirichlet self_balancing": lambda: partitions.dirichlet(
            labels, k, alpha, min_partition_size=min_size, self_balancing=True, seed=0
        ),
        "pathological #C=2": lambda: partitions.pathological(labels, k, 2, seed=0),
        "shards (2 per partition)": lambda: partitions.shards(labels, k, seed=0),
        "iid": lambda: partitions.iid(labels, k, seed=0),
    }
    draws = []
    jobs["reference"] = lambda: draws.append(niid_bench_dirichlet(labels, k, alpha, min_size, np.random.default_rng(0))[1])
    times = best_times(jobs, args.repeats)
    reference_time, reference_tries = times.pop("reference"), draws[-1]
    jobs.pop("reference")

    width = max(map(len, jobs)) + 2
    for name, seconds in times.items():
        print(f"  fedsim {name:<{width}} {seconds:8.3f} s")
    print(f"  {'reference NIID-Bench loop':<{width + 7}} {reference_time:8.3f} s ({reference_tries} draw(s))")
    ratio = times["dirichlet self_balancing"] / reference_time
    print(f"ratio fedsim dirichlet(self_balancing) / reference: {ratio:.3f} ({1 / ratio:.1f}x faster)")
    print(f"target dirichlet < 1 s: {'met' if times['dirichlet'] < 1.0 else 'NOT met'} ({times['dirichlet']:.3f} s)")


if __name__ == "__main__":
    main()
