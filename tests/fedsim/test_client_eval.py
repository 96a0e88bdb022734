"""Local test sets and the global model on every client's: the split, the batched pass, the rows, resume."""

import shutil

import numpy as np
import pytest
import torch

import partitions
from fedsim.cli import main
from fedsim.client import evaluate
from fedsim.config.run_config import RunConfig
from fedsim.data import load_dataset
from fedsim.engines.inprocess import run
from fedsim.models import create_model
from fedsim.results.client_eval import CLIENT_COLUMNS, client_statistics, evaluate_clients
from fedsim.results.folder import read_rows
from fedsim.client.tasks import create_task

# 5 clients of the digits under Dir(0.3), a quarter of each held back; float64 so that engines compare to 1e-10
LOCAL = {"dataset": "digits", "model": "mlp", "num_partitions": 5, "partition": "dirichlet", "alpha": 0.3,
         "fraction": 0.6, "rounds": 4, "local_steps": 3, "batch_size": 20, "lr": 0.1, "dtype": "float64",
         "local_test_fraction": 0.25, "client_target": 0.5}


def test_each_client_holds_back_its_share_of_every_class_it_has_enough_of():
    labels = np.random.default_rng(1).integers(0, 4, 400)
    whole = partitions.dirichlet(labels, 6, alpha=0.5, min_partition_size=10, seed=0)
    split = partitions.split_local_test(whole, labels, 0.2, seed=3)
    assert split == partitions.split_local_test(whole, labels, 0.2, seed=3)  # seeded
    assert split != partitions.split_local_test(whole, labels, 0.2, seed=4)
    for part, train, test in zip(whole, split, split.local_test):
        assert np.array_equal(np.sort(np.concatenate([train, test])), part) and not set(train) & set(test)
        for label in np.unique(labels[part]):
            held, count = int((labels[test] == label).sum()), int((labels[part] == label).sum())
            assert held == min(int(np.floor(0.2 * count + 0.5)), count - 1), (label, count, held)
    assert split.params["local_test_fraction"] == 0.2


@pytest.mark.parametrize("fraction", [0.0, 1.0])
def test_a_fraction_that_leaves_nothing_to_train_or_test_on_is_one_error_naming_the_flag(tmp_path, capsys, fraction):
    with pytest.raises(SystemExit):
        main(["run", "--dataset", "digits", "--local-test-fraction", str(fraction), "--out", str(tmp_path / "r")])
    assert capsys.readouterr().err.strip() == (f"fedsim run: error: `--local-test-fraction` must be in (0.0, 1.0), "
                                               f"got {fraction}")


def test_the_batched_pass_equals_one_evaluation_per_client():
    data = load_dataset("digits")
    torch.manual_seed(0)
    model = create_model("mlp", num_classes=10, in_channels=1, image_size=8).double()
    task = create_task(10)
    whole = partitions.iid(data.train_labels.numpy(), 7, seed=0)
    local_test = partitions.split_local_test(whole, data.train_labels.numpy(), 0.3, seed=0).local_test
    clients = evaluate_clients(model, None, data, task=task, local_test=local_test, batch_size=64)
    for client, indices in zip(clients, local_test):
        alone = evaluate(model, None, data, task=task, split="train", indices=indices)
        assert client["n"] == alone["num_examples"] == len(indices)
        assert client["accuracy"] == pytest.approx(alone["accuracy"], abs=1e-12)
        assert client["loss"] == pytest.approx(alone["loss"], abs=1e-10)


def by_hand(clients: list[dict], target: float) -> dict:
    """The row statistics of 5 clients' rows of ``clients.csv``, each written out from its definition."""
    accuracy = np.array([client["accuracy"] for client in clients])
    n = np.array([client["n"] for client in clients])
    assert len(clients) == 5  # so that the worst 10%, ceil(5 / 10) = 1 client, is the worst client alone
    return {"client_acc_mean": accuracy.sum() / 5, "client_acc_weighted": (accuracy * n).sum() / n.sum(),
            "client_acc_std": np.sqrt(((accuracy - accuracy.mean()) ** 2).mean()), "client_acc_min": accuracy.min(),
            "client_acc_worst10": accuracy.min(), "client_acc_p10": np.percentile(accuracy, 10),
            "client_share_at_target": (accuracy >= target).sum() / 5}


@pytest.mark.parametrize("accuracy, worst10", [
    ([0.9, 0.2, 0.6, 0.4], 0.2),  # K=4: ceil(0.4) = 1 client, the lowest (the 10th percentile: 0.26)
    ([1.0] * 19 + [0.0], 0.5),  # K=20: the 2 lowest, 0 and 1 (the 10th percentile: 1.0)
    ([0.0, 0.5] + [1.0] * 10, 0.25),  # K=12: ceil(1.2) = 2 clients (floor: 1, the worst alone)
    ([0.1, 0.3, 0.3, 0.3] + [1.0] * 16, 0.2),  # K=20, a tie at the cut: any one of the 0.3s is the second
    ([0.25, 0.5, 0.5, 0.5] + [1.0] * 8, 0.375),  # K=12, a tie at the cut
    ([0.7] * 20, 0.7),  # all tied
])
def test_the_worst_10_percent_is_the_mean_of_the_lowest_tenth_of_the_clients_rounded_up(accuracy, worst10):
    clients = [{"client": k, "n": 10, "accuracy": a, "personal_accuracy": a} for k, a in enumerate(accuracy)]
    assert client_statistics(clients, 0.8)["client_acc_worst10"] == pytest.approx(worst10, abs=1e-12)
    # a held-out client has no personal accuracy (NaN): the worst 10% is of the clients measured
    clients.append({"client": len(clients), "n": 10, "accuracy": 0.0, "personal_accuracy": np.nan})
    personal = client_statistics(clients, 0.8, "personal_accuracy", "personal_")
    assert personal["personal_acc_worst10"] == pytest.approx(worst10, abs=1e-12)
    assert personal["personal_acc_p10"] == pytest.approx(np.percentile(accuracy, 10), abs=1e-12)


def test_every_client_is_evaluated_and_a_resumed_run_continues_clients_csv_without_duplicates(tmp_path):
    config = RunConfig(**LOCAL, eval_clients_every=2)
    run(config, tmp_path / "straight")
    clients = read_rows(tmp_path / "straight" / "clients.csv")
    assert [(row["round"], row["client"]) for row in clients] == [(r, k) for r in (2, 4) for k in range(5)]
    rows = read_rows(tmp_path / "straight" / "metrics.csv")
    for row in rows:
        evaluated = [client for client in clients if client["round"] == row["round"]]
        expected = by_hand(evaluated, 0.5) if evaluated else dict.fromkeys(CLIENT_COLUMNS, np.nan)
        assert set(expected) == set(CLIENT_COLUMNS)
        assert {key: row[key] for key in CLIENT_COLUMNS} == pytest.approx(expected, abs=1e-12, nan_ok=True)
    # killed after its round-2 checkpoint, with round 3's clients appended since (every round evaluates them)
    every = config.replace(eval_clients_every=1)
    run(every, tmp_path / "every")
    run(every.replace(rounds=2), tmp_path / "killed")
    longer = tmp_path / "longer"
    shutil.copytree(tmp_path / "killed", longer)
    run(every.replace(rounds=3), longer, resume=True)
    shutil.copy(longer / "clients.csv", tmp_path / "killed" / "clients.csv")
    with open(tmp_path / "killed" / "clients.csv", "a") as stream:
        stream.write("1,2")  # and round 4's first row cut short by the kill, its round read as 1
    run(every, tmp_path / "killed", resume=True)
    resumed, straight = (read_rows(tmp_path / name / "clients.csv") for name in ("killed", "every"))
    assert [(row["round"], row["client"]) for row in resumed] == [(r, k) for r in range(1, 5) for k in range(5)]
    for got, want in zip(resumed, straight):
        assert got["n"] == want["n"] and abs(got["accuracy"] - want["accuracy"]) < 1e-10
        assert abs(got["loss"] - want["loss"]) < 1e-10


def test_a_run_whose_rows_lack_the_worst_10_percent_resumes_with_it_from_then_on(tmp_path):
    """A checkpoint whose rows hold the 10th percentile but not the worst 10%'s mean, as older runs wrote them."""
    import math

    run(RunConfig(**LOCAL).replace(rounds=2), tmp_path / "r")
    checkpoint = torch.load(tmp_path / "r" / "checkpoint.pt", weights_only=True)
    for row in checkpoint["rows"]:
        del row["client_acc_worst10"]
    torch.save(checkpoint, tmp_path / "r" / "checkpoint.pt")
    run(RunConfig(**LOCAL), tmp_path / "r", resume=True)
    rows = read_rows(tmp_path / "r" / "metrics.csv")
    assert [math.isnan(row["client_acc_worst10"]) for row in rows] == [True, True, False, False]  # not measured
    assert not any(math.isnan(row["client_acc_p10"]) for row in rows)
    last = [client["accuracy"] for client in read_rows(tmp_path / "r" / "clients.csv") if client["round"] == 4]
    assert rows[-1]["client_acc_worst10"] == pytest.approx(min(last), abs=1e-12)  # 5 clients: the worst alone


def test_clients_with_fewer_than_10_local_test_samples_are_named_once_with_the_flag_to_raise(tmp_path):
    from partitions import Partition

    from .test_cli import fedsim

    result = fedsim("run", "--dataset", "digits", "--model", "mlp", "--partition", "iid", "--num-partitions", "10",
                    "--local-test-fraction", "0.05", "--rounds", "2", "--batch-size", "50", "--quiet",
                    "--out", str(tmp_path / "r"))
    assert result.returncode == 0, result.stderr
    sizes = [test.size for test in Partition.load(tmp_path / "r" / "partition.json").local_test]
    small = sum(size < 10 for size in sizes)
    assert 1 < small < 10  # the split this test needs: some clients below 10 samples, not all
    assert result.stderr.count("warning:") == 1  # once, though the clients were evaluated in both rounds
    assert (f"fedsim run: warning: {small} of 10 clients have fewer than 10 local test samples (the fewest has "
            f"{min(sizes)})") in result.stderr
    assert "`client_acc_min`" in result.stderr and "raise `--local-test-fraction` (now 0.05)" in result.stderr


def test_the_summary_keeps_each_classs_test_accuracy_of_the_last_evaluation(tmp_path):
    from fedsim.results.folder import read_json

    config = RunConfig(dataset="digits", model="mlp", num_partitions=3, rounds=2, batch_size=50)
    result = run(config, tmp_path / "r")
    per_class = read_json(tmp_path / "r" / "summary.json")["fedavg"]["final_per_class_test_accuracy"]
    data = load_dataset("digits")
    expected = evaluate(create_model("mlp", num_classes=10, in_channels=1, image_size=8), result.global_state,
                        data, task=create_task(10))
    assert per_class == pytest.approx(expected["per_class_accuracy"], abs=1e-6) and len(per_class) == 10


def test_personalized_evaluation_fine_tunes_each_client_from_the_global_model_and_changes_no_result(tmp_path):
    """FedAvg-FT, worked by hand for client 3 after the last round: k steps of its local training from the
    global model, on its own stream, then its local test set; the run's own trajectory is untouched."""
    import dataclasses

    from fedsim.build import RunSetup
    from fedsim.client import client_update
    from fedsim.seeding import Stream, derive_seed
    from fedsim.client.training import LocalTraining

    config = RunConfig(**LOCAL, personalize_steps=3)
    personal = run(config, tmp_path / "ft")
    plain = run(config.replace(personalize_steps=None))
    assert all(torch.equal(a, b) for a, b in zip(personal.global_state, plain.global_state))
    gradient = RunConfig(**LOCAL).for_strategy("allreduce")  # its model is its global state: put back after
    assert all(torch.equal(a, b) for a, b in zip(run(gradient.replace(personalize_steps=3)).global_state,
                                                 run(gradient).global_state))
    last = [row for row in read_rows(tmp_path / "ft" / "clients.csv") if row["round"] == 4]
    setup = RunSetup.build(config)
    training = dataclasses.replace(LocalTraining.from_config(config), epochs=None, local_steps=3)
    client_update(setup.model, personal.global_state, setup.data, setup.partition[3], task=setup.task,
                  training=training, seed=derive_seed(config.seed, Stream.PERSONALIZE), round=3, client=3,
                  return_delta=False)
    by_hand = evaluate(setup.model, None, setup.data, task=setup.task, split="train",
                       indices=setup.partition.local_test[3])
    assert last[3]["personal_accuracy"] == pytest.approx(by_hand["accuracy"], abs=1e-12)
    assert last[3]["personal_loss"] == pytest.approx(by_hand["loss"], abs=1e-10)
    assert last[3]["personal_loss"] != pytest.approx(last[3]["loss"], abs=1e-3)  # the fine-tuning did something
    row = read_rows(tmp_path / "ft" / "metrics.csv")[-1]
    assert row["personal_acc_mean"] == pytest.approx(np.mean([client["personal_accuracy"] for client in last]))


def test_held_out_clients_never_train_and_are_evaluated_as_unseen(tmp_path, capsys):
    from fedsim.algorithms.scaffold import Scaffold
    from fedsim.build import RunSetup
    from fedsim.results.client_eval import round_statistics
    from fedsim.rounds.result import build_rounds

    config = RunConfig(**{**LOCAL, "num_partitions": 10, "fraction": 0.5, "holdout_clients": 0.3})
    setup = RunSetup.build(config)
    held = setup.partition.params["holdout_clients"]
    assert len(held) == 3 and all(setup.partition[k].size == 0 and setup.partition.local_test[k].size for k in held)
    rounds = build_rounds(config, setup)
    for round_index in range(20):
        sampled = rounds.sampled_clients(round_index)
        assert not set(sampled) & set(held) and len(sampled) == 4  # half of the 7 that train, rounded
    assert Scaffold(config.replace(strategy="scaffold"), setup.model, rounds.global_state).num_clients == 7
    run(config, tmp_path / "run")
    clients = [row for row in read_rows(tmp_path / "run" / "clients.csv") if row["round"] == 4]
    row = read_rows(tmp_path / "run" / "metrics.csv")[-1]
    seen = [client["accuracy"] for client in clients if client["client"] not in held]
    unseen = [client["accuracy"] for client in clients if client["client"] in held]
    assert row["client_acc_mean"] == pytest.approx(np.mean(seen)) and row["unseen_acc_mean"] == pytest.approx(
        np.mean(unseen))
    assert row["participation_gap"] == pytest.approx(np.mean(seen) - np.mean(unseen))
    by_hand = round_statistics([{"client": 0, "n": 1, "accuracy": 0.9}, {"client": 1, "n": 3, "accuracy": 0.5},
                                {"client": 2, "n": 1, "accuracy": 0.7}], 0.6, holdout=[1, 2])
    assert (by_hand["client_acc_mean"], by_hand["unseen_acc_mean"]) == (0.9, pytest.approx(0.6))
    assert by_hand["unseen_acc_weighted"] == pytest.approx((1.5 + 0.7) / 4)
    assert by_hand["participation_gap"] == pytest.approx(0.3)
    for share in ("0.01", "0.99"):  # none held out; none left to train
        with pytest.raises(SystemExit):
            main(["run", "--dataset", "digits", "--num-partitions", "10", "--local-test-fraction", "0.2",
                  "--holdout-clients", share, "--out", str(tmp_path / f"bad{share}")])
        assert "`--holdout-clients`=" + share.rstrip("0") + " of 10 clients holds out" in capsys.readouterr().err


def test_clients_csv_grows_by_the_new_rows_and_a_line_cut_short_is_not_read(tmp_path):
    from fedsim.results.csv_tables import append_table

    path = tmp_path / "clients.csv"
    append_table(path, ["round", "client"], [{"round": 1, "client": 0}])
    append_table(path, ["round", "client"], [{"round": 2, "client": 0}, {"round": 2, "client": 1}])
    assert path.read_text() == "round,client\n1,0\n2,0\n2,1\n"
    with open(path, "a") as stream:
        stream.write("3,")
    assert read_rows(path) == [{"round": 1, "client": 0}, {"round": 2, "client": 0}, {"round": 2, "client": 1}]
