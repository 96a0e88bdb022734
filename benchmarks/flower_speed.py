"""Time FedAvg through fedsim's engines and through a plain Flower app, with the memory of every process.

Run ``python benchmarks/flower_speed.py``. Two jobs, each run once per engine, one after the other:

- J: FedAvg, 10 IID clients of mnist-5k, the McMahan CNN, E=1, B=10, lr 0.05, 5 rounds;
- X: the same over 1,000 clients of 4 samples, 100 sampled per round;

through (a) ``fedsim run``, (b) ``fedsim flower simulate``, (c) ``fedsim flower deploy`` with one
SuperNode per client (job J only), and (d) a plain Flower app as Flower's quickstart writes and
runs it (``quickstart_app/``, submitted with ``flwr run`` to a simulation SuperLink by
``flower_reference.py``). (b) and (d) run on the same Flower runtime, one CPU per client. Each
engine runs in a child process; its wall time, the peak of the
summed memory (PSS, which counts shared pages once) of the child and every process below it, and
the final test accuracy are printed, with the ratios to (d), and the mean wall time of a round
after the first (training and evaluation; for (d) the time between its server evaluations).
``fedsim run`` trains clients on ``--workers`` processes (default 2: both cores of the machine
these goals are set on). Goals: on J, (a) <= 0.75x (d)'s time and <= 0.5x its memory; on X,
(a) >= 8x faster than (d) end to end and >= 10x per round after the first; (b) no slower than (d).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from fedsim.processes import descendants
from fedsim.results.folder import read_rows

HERE = Path(__file__).resolve().parent
JOBS = {
    "J": {"clients": 10, "sampled": 10},
    "X": {"clients": 1000, "sampled": 100},
}

ENGINES = {"a": "(a) fedsim run", "b": "(b) fedsim flower simulate", "c": "(c) fedsim flower deploy",
           "d": "(d) plain Flower app"}


def pss_bytes(pid: int) -> int:
    """Return the proportional set size of ``pid`` (0 if it is gone)."""
    try:
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            if line.startswith("Pss:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError):
        pass
    return 0


def measure(command: list[str]) -> dict:
    """Run ``command``; return its wall seconds, peak summed PSS of its process tree, and its last stdout line."""
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    peak = 0

    def sample():
        nonlocal peak
        while process.poll() is None:
            peak = max(peak, sum(pss_bytes(pid) for pid in [process.pid, *descendants(process.pid)]))
            time.sleep(0.5)

    sampler = threading.Thread(target=sample, daemon=True)
    started = time.perf_counter()
    sampler.start()
    stdout, _ = process.communicate()
    wall = time.perf_counter() - started
    sampler.join()
    if process.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} exited with status {process.returncode}")
    return {"wall_s": wall, "pss_bytes": peak, "stdout": stdout}


def fedsim_flags(job: dict, rounds: int) -> list[str]:
    return ["--strategy", "fedavg", "--dataset", "mnist-5k", "--model", "cnn", "--partition", "iid",
            "--num-partitions", str(job["clients"]), "--fraction", str(job["sampled"] / job["clients"]),
            "--local-epochs", "1", "--batch-size", "10", "--lr", "0.05",
            "--rounds", str(rounds), "--quiet"]


def final_accuracy(folder: Path) -> float:
    return json.loads((folder / "summary.json").read_text())["fedavg"]["final_test_accuracy"]


def round_times(folder: Path) -> list[float]:
    """Return each round's wall seconds from a fedsim results folder's metrics.csv (whose wall_s adds up)."""
    totals = [0.0, *(float(row["wall_s"]) for row in read_rows(folder / "metrics.csv"))]
    return [later - earlier for earlier, later in zip(totals, totals[1:])]


def after_warm_up(seconds: list[float]) -> float:
    """Return the mean of the rounds after the first (the first alone if there is one round)."""
    later = seconds[1:] or seconds
    return sum(later) / len(later) if later else float("nan")


def run_engine(engine: str, job: dict, rounds: int, folder: Path, workers: int) -> dict:
    """Run one engine on one job in a child process; return its measurements and final accuracy."""
    out = folder / f"{engine}-{job['clients']}"
    fedsim = [sys.executable, "-m", "fedsim"]
    commands = {
        "(a) fedsim run": [*fedsim, "run", *fedsim_flags(job, rounds), "--workers", str(workers), "--out", str(out)],
        "(b) fedsim flower simulate": [*fedsim, "flower", "simulate", *fedsim_flags(job, rounds), "--out", str(out)],
        "(c) fedsim flower deploy": [*fedsim, "flower", "deploy", *fedsim_flags(job, rounds), "--out", str(out)],
        "(d) plain Flower app": [sys.executable, str(HERE / "flower_reference.py"), str(job["clients"]),
                                 str(job["sampled"]), str(rounds)],
    }
    result = measure(commands[engine])
    if engine.startswith("(d)"):
        printed = json.loads(result["stdout"].strip().splitlines()[-1])
        result["accuracy"], result["round_s"] = printed["accuracy"], printed["round_s"]
    else:
        result["accuracy"], result["round_s"] = final_accuracy(out), round_times(out)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=5, help="rounds per job (default 5)")
    parser.add_argument("--jobs", default="J,X", help="which jobs, comma-separated (default J,X)")
    parser.add_argument("--workers", type=int, default=2, help="fedsim run's --workers (default 2)")
    parser.add_argument("--engines", default="a,b,c,d",
                        help="which engines, by letter, comma-separated (default a,b,c,d; (d) is always run: "
                             "the ratios are to it)")
    args = parser.parse_args()
    if args.rounds < 1:
        parser.error(f"--rounds must be at least 1, got {args.rounds}")
    if args.workers < 1:
        parser.error(f"--workers must be at least 1, got {args.workers}")
    names = [name.strip() for name in args.jobs.split(",") if name.strip()]
    unknown = [name for name in names if name not in JOBS]
    if unknown:
        parser.error(f"--jobs: unknown job {unknown[0]!r}; the jobs are J and X")
    letters = {letter.strip() for letter in args.engines.split(",") if letter.strip()} | {"d"}
    if unknown := sorted(letters - set(ENGINES)):
        parser.error(f"--engines: unknown engine {unknown[0]!r}; the engines are a, b, c and d")
    results = {}
    with tempfile.TemporaryDirectory() as folder:
        for name in names:
            job = JOBS[name]
            # (c) starts a process per client: not for 1,000 clients on one machine
            engines = [engine for letter, engine in ENGINES.items()
                       if letter in letters and (letter != "c" or job["clients"] <= 100)]
            results[name] = {engine: run_engine(engine, job, args.rounds, Path(folder), args.workers)
                             for engine in engines}
    for name, measured in results.items():
        job = JOBS[name]
        reference = measured["(d) plain Flower app"]
        print(f"\njob {name}: FedAvg, {job['clients']} IID clients of mnist-5k, {job['sampled']} per round, cnn, "
              f"E=1, B=10, lr 0.05, {args.rounds} rounds; fedsim run --workers {args.workers}")
        print(f"{'engine':<28} {'wall s':>7} {'vs (d)':>7} {'s/round':>8} {'vs (d)':>7} {'memory GB':>10} "
              f"{'vs (d)':>7} {'accuracy':>9}")
        reference_round = after_warm_up(reference["round_s"])
        for engine, result in measured.items():
            result.pop("stdout")
            per_round = after_warm_up(result["round_s"])
            print(f"{engine:<28} {result['wall_s']:>7.1f} {result['wall_s'] / reference['wall_s']:>6.2f}x "
                  f"{per_round:>8.2f} {per_round / reference_round:>6.2f}x "
                  f"{result['pss_bytes'] / 1e9:>10.2f} {result['pss_bytes'] / reference['pss_bytes']:>6.2f}x "
                  f"{result['accuracy']:>9.4f}")
    print(json.dumps(results))


if __name__ == "__main__":
    main()
