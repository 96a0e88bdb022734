"""Helpers the benchmark scripts share: interleaved best-of timing and a plain centralized training loop."""

from __future__ import annotations

import time


def best_times(jobs: dict, repeats: int) -> dict:
    """Return the best wall time of each job over ``repeats`` rounds, the jobs interleaved in every round.

    Interleaving makes noise on a shared machine hit every job alike, so the ratios stay honest.
    """
    best = {name: float("inf") for name in jobs}
    for _ in range(repeats):
        for name, job in jobs.items():
            start = time.perf_counter()
            job()
            best[name] = min(best[name], time.perf_counter() - start)
    return best


def centralized_epoch(model, data, indices, batch_size: int, lr: float, seed: int = 0) -> None:
    """One epoch of a plain training loop over ``indices``: shuffle, index, forward, backward, SGD step."""
    import torch  # here, so that the partition benchmark runs without torch

    from fedsim.data import normalize

    optimizer = torch.optim.SGD(model.parameters(), lr=lr)
    indices = torch.as_tensor(indices)
    order = indices[torch.randperm(indices.numel(), generator=torch.Generator().manual_seed(seed))]
    model.train()
    for start in range(0, order.numel(), batch_size):
        batch = order[start : start + batch_size]
        logits = model(normalize(data.train_images[batch], data))
        loss = torch.nn.functional.cross_entropy(logits, data.train_labels[batch])
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
