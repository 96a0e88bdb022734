"""A run's summary: its final numbers, as ``summary.json`` and the tables give them."""

from __future__ import annotations

import math


#: The multi-label task's metrics that rows and summaries carry besides subset accuracy.
MULTILABEL_METRICS = ("micro_f1", "macro_f1", "mean_average_precision")

#: The evaluated rounds whose mean accuracy `summarize` reports beside the final and the best.
LAST_ROUNDS = 5


def summarize(rows: list[dict], progress, num_partitions: int, target_accuracy: float | None = None) -> dict:
    """Return the final numbers of a run: accuracy, loss, bytes, time.

    Accuracy is given three ways, each under its own name, since papers report all three and a
    reader must never take one for another: the last evaluated round's (``final_test_accuracy``),
    the best over the evaluated rounds with its round (``best_test_accuracy``, ``best_round``:
    NIID-Bench's metric), and the mean over the last `LAST_ROUNDS` evaluated rounds
    (``last_5_mean_test_accuracy``), which a lucky round moves less. A run that evaluated fewer
    rounds gets the mean of those it evaluated, and ``last_5_mean_rounds`` says how many it averages
    (the tables add "(of 3)", `last_rounds_note`).
    With local test sets, the last evaluation's per-client statistics follow (``final_client_acc_mean``...).

    Parameters
    ----------
    rows : list of dict
        The rows of ``metrics.csv``.
    progress : fedsim.results.recorder.Progress
    num_partitions : int
    target_accuracy : float, optional
        With it, the first evaluated round whose test accuracy reaches it (``target_round``) and
        its simulated time (``time_to_target_s``), both ``None`` where no round did.

    Examples
    --------
    >>> from fedsim.results.progress import Progress
    >>> rows = [{"round": r, "test_accuracy": a, "test_loss": 1.0} for r, a in enumerate([.5, .9, .6, .7, .8, .7], 1)]
    >>> s = summarize(rows, Progress(), num_partitions=2)
    >>> s["final_test_accuracy"], s["best_test_accuracy"], s["best_round"], round(s["last_5_mean_test_accuracy"], 3)
    (0.7, 0.9, 2, 0.74)
    >>> s = summarize(rows[:3], Progress(), num_partitions=2)
    >>> round(s["last_5_mean_test_accuracy"], 3), s["last_5_mean_rounds"]
    (0.667, 3)
    >>> timed = [{**row, "sim_time_s": 10.0 * row["round"]} for row in rows]
    >>> s = summarize(timed, Progress(), num_partitions=2, target_accuracy=0.75)
    >>> s["target_round"], s["time_to_target_s"]
    (2, 20.0)
    """
    evaluated = [row for row in rows if not math.isnan(row["test_accuracy"])]
    final = evaluated[-1] if evaluated else rows[-1] if rows else {"test_accuracy": math.nan, "test_loss": math.nan}
    best = max(evaluated, key=lambda row: row["test_accuracy"], default=None)  # the first of equal bests
    last = [row["test_accuracy"] for row in evaluated[-LAST_ROUNDS:]]
    rounds = max(len(rows), 1)
    summary = {
        "final_test_accuracy": final["test_accuracy"],
        "final_test_loss": final["test_loss"],
        "best_test_accuracy": math.nan if best is None else best["test_accuracy"],
        "best_round": None if best is None else best["round"],
        f"last_{LAST_ROUNDS}_mean_test_accuracy": sum(last) / len(last) if last else math.nan,
        f"last_{LAST_ROUNDS}_mean_rounds": len(last),
        "bytes_communicated": progress.bytes_communicated,
        "bytes_up_per_rank_per_round": progress.bytes_up / num_partitions / rounds,
        "bytes_down_per_rank_per_round": progress.bytes_down / num_partitions / rounds,
        "samples_seen": progress.samples_seen,
        "wall_s": progress.wall_s,
        "eval_s": progress.eval_s,
        "rounds": len(rows),
    }
    for key in MULTILABEL_METRICS:
        if f"test_{key}" in final:
            summary[f"final_test_{key}"] = final[f"test_{key}"]
    if target_accuracy is not None:
        reached = next((row for row in evaluated if row["test_accuracy"] >= target_accuracy), None)
        summary["target_accuracy"] = target_accuracy
        summary["target_round"] = None if reached is None else reached["round"]
        summary["time_to_target_s"] = None if reached is None else reached.get("sim_time_s")
    if "sim_time_s" in final:
        summary["sim_time_s"] = rows[-1]["sim_time_s"]
    clients = [row for row in rows if not math.isnan(row.get("client_acc_mean", math.nan))]
    if clients:  # the last evaluation on the clients' local test sets
        summary.update({f"final_{key}": value for key, value in clients[-1].items()
                        if key.startswith(("client_", "personal_", "unseen_", "participation_"))})
    return summary


def last_rounds_note(rounds) -> str:
    """Return what a table adds to a last-5 mean over fewer evaluated rounds, ``rounds`` of them: " (of 3)".

    Nothing when it averages `LAST_ROUNDS` rounds, none (no mean to qualify), or an unknown number
    (``None`` or NaN: a summary written before ``last_5_mean_rounds`` was).

    Examples
    --------
    >>> last_rounds_note(3), last_rounds_note(5), last_rounds_note(None)
    (' (of 3)', '', '')
    """
    if rounds is None or not 0 < rounds < LAST_ROUNDS:  # NaN compares False
        return ""
    return f" (of {int(rounds)})"
