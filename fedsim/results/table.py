"""The plain-text table of finished runs' final numbers, which `fedsim run`, `compare` and the Flower commands print.

Apart from the engines, so that a command that ran its strategy elsewhere (Flower) prints it
without importing them.
"""

from __future__ import annotations

from .summary import last_rounds_note

#: The clients' statistics (summary entry -> column) that `comparison_table` shows for runs with local test sets.
CLIENT_COLUMNS = {"final_client_acc_mean": "clients' mean acc", "final_client_acc_worst10": "worst 10% acc"}


def comparison_table(results: dict) -> str:
    """Return a plain-text table of the strategies' final numbers; a diverged one says so in place of its accuracy.

    Accuracy is the last evaluated round's, the best with its round, and the mean of the last
    five evaluated rounds (`fedsim.results.summary.summarize`; "(of 3)" when only three were
    evaluated). When a run measured its clients on their local test sets (``local_test_fraction``),
    the clients' mean accuracy and the worst 10%'s (`fedsim.results.client_eval.worst_tenth_mean`)
    at its last evaluation follow: who is left behind. A diverged strategy's other cells count the
    rounds before the one where it diverged.
    """
    # the clients' columns only where some run has them: a run without local test sets keeps its table
    clients = [key for key in CLIENT_COLUMNS if any(key in result.summary for result in results.values())]
    header = ("strategy", "final acc", "best acc (round)", "last-5 mean acc", *(CLIENT_COLUMNS[key] for key in clients),
              "final loss", "MB sent", "samples", "wall s", "rounds")
    lines = []
    for name, result in results.items():
        s = result.summary
        best_round = s.get("best_round")
        numbers = [f"{s['final_test_accuracy']:.4f}",
                   f"{s['best_test_accuracy']:.4f}" + (f" ({best_round})" if best_round is not None else ""),
                   f"{s.get('last_5_mean_test_accuracy', float('nan')):.4f}"
                   + last_rounds_note(s.get("last_5_mean_rounds")),
                   *("-" if s.get(key) is None else f"{s[key]:.4f}" for key in clients), f"{s['final_test_loss']:.4f}"]
        if s.get("diverged"):
            numbers = [f"diverged in round {s['diverged_round']}", *["-"] * (len(numbers) - 1)]
        lines.append((name, *numbers, f"{s['bytes_communicated'] / 1e6:,.1f}", f"{s['samples_seen']:,}",
                      f"{s['wall_s']:.1f}", str(s["rounds"])))
    widths = [max(len(row[i]) for row in [header, *lines]) for i in range(len(header))]
    render = lambda row: "  ".join(cell.ljust(w) if i == 0 else cell.rjust(w)  # noqa: E731
                                   for i, (cell, w) in enumerate(zip(row, widths)))
    return "\n".join([render(header), render(tuple("-" * w for w in widths)), *map(render, lines)])
