"""The round loop: train a round, evaluate, record, checkpoint; resume where a killed run stopped."""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import torch

from ...client import evaluate, seeded_global_rng
from ...models import create_model
from ...partitioning import partition_for
from ...results import RunFolder
from ...seeding import derive_seed
from ...strategies import get_strategy
from ...tasks import create_task
from .fedavg import FedAvgRounds
from .gradient import GradientRounds
from .rounds import samples_per_round

_MODEL_STREAM = 0x30DE1
_CHECKPOINT_FORMAT = 1


@dataclass
class RunResult:
    """What `run` returns: the per-round rows, the summary and the final global tensors."""

    rows: list[dict]
    summary: dict
    global_state: list[torch.Tensor]


def resolve_device(name: str) -> torch.device:
    """Return the device for ``--device`` (``auto`` picks CUDA when present)."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name == "cuda" and not torch.cuda.is_available():
        raise RuntimeError("`device`='cuda' but no CUDA device is available; use 'cpu' or 'auto'")
    return torch.device(name)


def build_model(config, data, device) -> torch.nn.Module:
    """Create the run's model with an initialisation that depends on the seed alone (same for every strategy)."""
    options = {} if config.norm is None else {"norm": config.norm}
    with seeded_global_rng(derive_seed(config.seed, _MODEL_STREAM), torch.device("cpu")):
        model = create_model(config.model, num_classes=data.num_classes, in_channels=data.in_channels,
                             image_size=data.image_size, **options)
    return model.to(device)


def run(config, out=None, *, resume: bool = False, quiet: bool = True, data=None, partition=None) -> RunResult:
    """Run one strategy in this process and return its rows, summary and final model.

    Parameters
    ----------
    config : fedsim.config.RunConfig
    out : str or Path, optional
        Results folder (see `fedsim.results`); nothing is written without it.
    resume : bool, default False
        Continue from ``out``'s checkpoint (the config must match the folder's).
    quiet : bool, default True
        No progress bar.
    data : fedsim.data.Dataset, optional
        Already-loaded data (else ``config.dataset`` is loaded).
    partition : partitions.Partition, optional
        Already-made partition (else made from the config's partition flags).
    """
    data = data or config.load_dataset()
    task = create_task(data.num_classes, multilabel=data.multilabel, label_smoothing=config.label_smoothing)
    if partition is None:
        partition = partition_for(config, data.train_labels.numpy())
    model = build_model(config, data, resolve_device(config.device))
    rounds_class = FedAvgRounds if get_strategy(config.strategy).local_training else GradientRounds
    rounds = rounds_class(config, model, data, task, partition)
    folder = RunFolder(out) if out is not None else None
    checkpoint = folder.start(config, partition, resume=resume) if folder else None

    # scheduled_samples: FedAvg's cumulative work, the grid every strategy reports on
    progress = {"round": 0, "samples_seen": 0, "scheduled_samples": 0, "bytes_communicated": 0, "wall_s": 0.0,
                "eval_s": 0.0, "bytes_up": 0, "bytes_down": 0}
    rows: list[dict] = []
    if checkpoint is not None:
        progress, rows = _restore(checkpoint, rounds)

    bar = _progress_bar(config, progress["round"], quiet)
    for round_index in range(progress["round"], config.rounds):
        started = time.perf_counter()
        progress["scheduled_samples"] += samples_per_round(config, partition, round_index)
        stats = rounds.train_round(round_index, progress["samples_seen"], progress["scheduled_samples"])
        last = round_index + 1 == config.rounds
        metrics = None
        if (round_index + 1) % config.eval_every == 0 or last:
            evaluation_started = time.perf_counter()
            metrics = evaluate(model, None if rounds_class is GradientRounds else rounds.global_state, data, task=task)
            progress["eval_s"] += time.perf_counter() - evaluation_started
        progress["wall_s"] += time.perf_counter() - started
        progress["round"] = round_index + 1
        progress["samples_seen"] += stats.samples
        progress["bytes_up"] += stats.bytes_up
        progress["bytes_down"] += stats.bytes_down
        progress["bytes_communicated"] = progress["bytes_up"] + progress["bytes_down"]
        rows.append(_row(config.strategy, progress, stats.train_loss, metrics, task.multilabel))
        if folder:
            folder.write_rows(rows)
            folder.log(_log_line(rows[-1]))
            if (round_index + 1) % config.checkpoint_every == 0 or last:
                folder.save_checkpoint(_checkpoint(progress, rows, rounds))
        if bar is not None:
            bar.set_postfix_str(f"acc {rows[-1]['test_accuracy']:.3f}", refresh=False)
            bar.update(1)
    if bar is not None:
        bar.close()

    summary = summarize(rows, progress, partition.num_partitions)
    if folder:
        folder.write_summary({config.strategy: summary})
        folder.save_model(rounds.global_state)
    return RunResult(rows, summary, [t.detach().clone() for t in rounds.global_state])


def summarize(rows: list[dict], progress: dict, num_partitions: int) -> dict:
    """Return the final numbers of a run: accuracy, loss, bytes, time."""
    evaluated = [row for row in rows if not math.isnan(row["test_accuracy"])]
    final = evaluated[-1] if evaluated else rows[-1]
    rounds = max(len(rows), 1)
    summary = {
        "final_test_accuracy": final["test_accuracy"],
        "final_test_loss": final["test_loss"],
        "best_test_accuracy": max((row["test_accuracy"] for row in evaluated), default=math.nan),
        "bytes_communicated": progress["bytes_communicated"],
        "bytes_up_per_rank_per_round": progress["bytes_up"] / num_partitions / rounds,
        "bytes_down_per_rank_per_round": progress["bytes_down"] / num_partitions / rounds,
        "samples_seen": progress["samples_seen"],
        "wall_s": progress["wall_s"],
        "eval_s": progress.get("eval_s", 0.0),
        "rounds": len(rows),
    }
    for key in ("test_micro_f1", "test_macro_f1", "test_mean_average_precision"):
        if key in final:
            summary[f"final_{key}"] = final[key]
    return summary


def _row(strategy, progress, train_loss, metrics, multilabel) -> dict:
    metrics = metrics or {}
    row = {
        "strategy": strategy,
        "round": progress["round"],
        "samples_seen": progress["samples_seen"],
        "bytes_communicated": progress["bytes_communicated"],
        "bytes_up": progress["bytes_up"],
        "bytes_down": progress["bytes_down"],
        # multi-label runs report subset accuracy (every label right) as their accuracy
        "test_accuracy": metrics.get("subset_accuracy" if multilabel else "accuracy", math.nan),
        "test_loss": metrics.get("loss", math.nan),
        "train_loss": train_loss,
        "wall_s": progress["wall_s"],
    }
    if multilabel:
        for key in ("micro_f1", "macro_f1", "mean_average_precision"):
            row[f"test_{key}"] = metrics.get(key, math.nan)
    return row


def _checkpoint(progress, rows, rounds) -> dict:
    return {
        "format": _CHECKPOINT_FORMAT,
        "progress": dict(progress),
        "rows": [dict(row) for row in rows],
        "global_state": [t.detach().cpu().clone() for t in rounds.global_state],
        "rounds": rounds.state_dict(),
    }


def _restore(checkpoint, rounds):
    if checkpoint.get("format") != _CHECKPOINT_FORMAT:
        raise ValueError(f"checkpoint format {checkpoint.get('format')!r} is not {_CHECKPOINT_FORMAT}")
    with torch.no_grad():
        torch._foreach_copy_(rounds.global_state, checkpoint["global_state"])
    rounds.load_state_dict(checkpoint["rounds"])
    return dict(checkpoint["progress"]), [dict(row) for row in checkpoint["rows"]]


def _progress_bar(config, start_round, quiet):
    if quiet:
        return None
    from tqdm.auto import tqdm

    return tqdm(total=config.rounds, initial=start_round, desc=config.strategy, unit="round", leave=True)


def _log_line(row) -> str:
    return (f"round {row['round']} samples {row['samples_seen']} bytes {row['bytes_communicated']} "
            f"test_accuracy {row['test_accuracy']:.4f} test_loss {row['test_loss']:.4f} "
            f"train_loss {row['train_loss']:.4f} wall_s {row['wall_s']:.2f}")
