"""Run the plain Flower app in ``quickstart_app/`` as Flower's quickstart runs it: the reference of flower_speed.py.

Run by ``flower_speed.py`` (``python benchmarks/flower_reference.py CLIENTS SAMPLED ROUNDS``). Each
client trains the McMahan CNN on its IID share of mnist-5k for one epoch (B=10, SGD lr 0.05);
the ``ServerApp`` runs Flower's ``FedAvg`` with ``Strategy.start`` and evaluates on the server.
The app is submitted with ``flwr run --stream`` to a SuperLink running Flower's simulation
runtime, with one virtual SuperNode per client and one CPU each: the runtime ``flwr run``
starts for a local federation (``flower-superlink --simulation``), here on a free port of
127.0.0.1 with a Flower home of its own, stopped at the end. Prints one JSON line: the wall
seconds of the run, the final accuracy and the time between the server's evaluations.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

from fedsim.engines.flower.federation import LocalFederation, tail

APP_FOLDER = Path(__file__).resolve().parent / "quickstart_app"


def main() -> None:
    clients, sampled, rounds = (int(word) for word in sys.argv[1:4])
    started = time.perf_counter()
    with LocalFederation(clients, simulation=True, num_cpus=os.cpu_count() or 1) as federation:
        result_file = federation.home / "result.json"
        entries = {"num-server-rounds": rounds, "fraction-train": sampled / clients, "result-file": str(result_file)}
        log = federation.home / "flower.log"
        with log.open("w") as stream:
            status = federation.run(entries, stream=stream, app_folder=APP_FOLDER)
        if status != 0 or not result_file.exists():
            raise SystemExit(f"flwr run exited with status {status}; the end of its log:\n{tail(log)}")
        result = json.loads(result_file.read_text())
    print(json.dumps({"wall_s": time.perf_counter() - started, **result}))


if __name__ == "__main__":
    main()
