"""quickstart: the ServerApp, a fedsim method with ``Strategy.start`` and evaluation on the server."""

import json
import time

import torch
from flwr.app import ArrayRecord, ConfigRecord, Context, MetricRecord
from flwr.serverapp import Grid, ServerApp

from fedsim.flower import MethodStrategy
from quickstart.task import Net, test

app = ServerApp()


@app.main()
def main(grid: Grid, context: Context) -> None:
    run_config = context.run_config
    torch.manual_seed(0)
    strategy = MethodStrategy(run_config["method"], Net(), fraction_train=run_config["fraction-train"],
                              fraction_evaluate=0.0, server_lr=run_config["server-lr"])
    evaluated_at: list[float] = []  # round 0 (the initial model), then each round
    accuracy = float("nan")

    def global_evaluate(server_round: int, arrays: ArrayRecord) -> MetricRecord:
        nonlocal accuracy
        evaluated_at.append(time.perf_counter())
        model = Net()
        model.load_state_dict(arrays.to_torch_state_dict())
        loss, accuracy = test(model, "cpu")
        return MetricRecord({"accuracy": accuracy, "loss": loss})

    result = strategy.start(grid=grid, initial_arrays=ArrayRecord(Net().state_dict()),
                            num_rounds=run_config["num-server-rounds"],
                            train_config=ConfigRecord({"lr": run_config["learning-rate"]}),
                            evaluate_fn=global_evaluate)
    if run_config["result-file"]:
        round_s = [later - earlier for earlier, later in zip(evaluated_at, evaluated_at[1:])]
        with open(run_config["result-file"], "w", encoding="utf-8") as stream:
            json.dump({"accuracy": accuracy, "round_s": round_s}, stream)
        torch.save(result.arrays.to_torch_state_dict(), run_config["result-file"] + ".model.pt")
