"""Cases the multi-process tests run under torchrun: ``python -m torch.distributed.run ... ddp_cases.py CASE OUT``.

Each case runs on every rank and rank 0 (or every rank) saves what the test checks to ``OUT``.
The cases are PyTorch's own ways of testing DDP: hooks against the arithmetic done by hand
(``test_ddp_hooks.py``) and uneven inputs under ``Join`` (``test_join.py``).
"""

import json
import os
import sys
from pathlib import Path

import torch
import torch.distributed as dist
from torch.distributed.algorithms.join import Join
from torch.nn.parallel import DistributedDataParallel

from fedsim.config.run_config import RunConfig
from fedsim.engines.distributed import run
from fedsim.engines.distributed.launch import start_process_group
from fedsim.comm.hooks import RankWeights, weighted_allreduce_hook
from fedsim.comm.sync_batchnorm import convert_sync_batchnorm


def engines(out: Path) -> None:
    """Run each config of ``configs.json`` on this engine; rank 0 saves the final global tensors."""
    configs = json.loads((out / "configs.json").read_text())
    start_process_group("cpu", timeout_s=120)
    finals = [run(RunConfig(**settings)).global_state for settings in configs]
    if dist.get_rank() == 0:
        torch.save(finals, out / "finals.pt")


def tiny_model(seed: int = 0) -> torch.nn.Module:
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(6, 4), torch.nn.Tanh(), torch.nn.Linear(4, 3)).double()


def rank_batch(rank: int) -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(100 + rank)
    return torch.randn(5, 6, generator=generator, dtype=torch.float64), torch.randint(0, 3, (5,), generator=generator)


def hooks(out: Path) -> None:
    """Every rank saves its local gradient and the gradients DDP leaves with each hook, and without one."""
    ranks = start_process_group("cpu", timeout_s=120)
    inputs, targets = rank_batch(ranks.rank)
    sizes = [30, 90]
    saved = {}
    for name, rule in [("local", None), ("none", None), ("equal", "equal"), ("size", "size"), ("dynamic", "dynamic")]:
        model = tiny_model()
        loss_fn = torch.nn.functional.cross_entropy
        if name != "local":
            model = DistributedDataParallel(model)
            if rule is not None:
                weights = RankWeights(rule, sizes, temperature=0.5)
                model.register_comm_hook(weights, weighted_allreduce_hook)
        loss = loss_fn(model(inputs), targets)
        if name == "dynamic":
            weights.contribute(float(loss))
        loss.backward()
        saved[name] = [p.grad.clone() for p in model.parameters()]
        saved[f"{name}_loss"] = float(loss)
    torch.save(saved, out / f"rank{ranks.rank}.pt")


def join(out: Path) -> None:
    """Rank i takes 3 + i steps of SGD on loss = sum of one weight, under Join, with each hook and none.

    Every active rank's gradient is 1, so each step moves the weight by lr times the sum of the
    active ranks' weights: what the test checks against the divisor rule.
    """
    ranks = start_process_group("cpu", timeout_s=60)
    results = {}
    for rule in ("none", "equal", "size", "dynamic"):
        module = _Scalar(torch.nn.Parameter(torch.zeros(1, dtype=torch.float64)))
        model = DistributedDataParallel(module)
        state = None
        if rule != "none":
            state = RankWeights(rule, [1, 3], temperature=1.0)
            model.register_comm_hook(state, weighted_allreduce_hook)
        optimizer = torch.optim.SGD(model.parameters(), lr=1.0)
        steps = 0
        with Join([model]):
            for _ in range(3 + ranks.rank):
                optimizer.zero_grad()
                loss = model(torch.ones(1, dtype=torch.float64)).sum()
                if state is not None and rule == "dynamic":
                    state.contribute(0.0)
                loss.backward()
                optimizer.step()
                steps += 1
        results[rule] = {"steps": steps, "weight": float(module.weight.detach())}
    torch.save(results, out / f"rank{ranks.rank}.pt")


def sync_batchnorm(out: Path) -> None:
    """Rank r puts 4 + 3r images through a SyncBatchNorm; every rank saves what a backward of sum(y * probe) gives.

    PyTorch's own check of SyncBatchNorm: its output and gradients on each rank's batch equal
    BatchNorm's on the ranks' batches concatenated.
    """
    ranks = start_process_group("cpu", timeout_s=120)
    images, probe = sync_batchnorm_inputs()
    rows = slice(0, 4) if ranks.rank == 0 else slice(4, None)
    layer = torch.nn.Sequential(torch.nn.BatchNorm2d(3)).double()
    convert_sync_batchnorm(layer)
    with torch.no_grad():
        layer[0].weight.copy_(torch.tensor([1.0, 2.0, 0.5]))
        layer[0].bias.copy_(torch.tensor([0.0, -1.0, 3.0]))
    inputs = images[rows].clone().requires_grad_()
    output = layer(inputs)
    (output * probe[rows]).sum().backward()
    torch.save({"output": output.detach(), "input_grad": inputs.grad, "weight_grad": layer[0].weight.grad,
                "bias_grad": layer[0].bias.grad, "running_mean": layer[0].running_mean,
                "running_var": layer[0].running_var, "type": type(layer[0]).__name__}, out / f"rank{ranks.rank}.pt")


def sync_batchnorm_inputs() -> tuple[torch.Tensor, torch.Tensor]:
    """Return 11 images of 3 channels (rank 0's first 4, rank 1's 7) off zero mean, and the loss's probe."""
    generator = torch.Generator().manual_seed(7)
    images = 5.0 + torch.randn(11, 3, 4, 4, generator=generator, dtype=torch.float64)
    return images, torch.randn(11, 3, 4, 4, generator=generator, dtype=torch.float64)


class _Scalar(torch.nn.Module):
    def __init__(self, weight):
        super().__init__()
        self.weight = weight

    def forward(self, x):
        return self.weight * x


CASES = {"engines": engines, "hooks": hooks, "join": join, "sync_batchnorm": sync_batchnorm}

if __name__ == "__main__":
    CASES[sys.argv[1]](Path(sys.argv[2]))
    # as fedsim's DDP loop does: no rank tears its gloo connections down while a peer still uses
    # them (a rank of the join case aborted at exit once in a loop of the suite)
    dist.barrier()
    dist.destroy_process_group()
    # as `python -m fedsim` leaves a rank: without Python's teardown, whose C++ destructors of torch's
    # globals abort a gloo rank now and then with every result written
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
