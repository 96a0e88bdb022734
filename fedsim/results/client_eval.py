"""The global model on every client's local test set: one batched pass, split by client, and its statistics.

A Non-IID study asks who is left behind: the mean accuracy over the clients hides the clients
a strategy fails. With local test sets (``local_test_fraction``), each evaluation of the
global model also scores it on every client's held-back samples, all K clients whether
sampled or not, and reports the spread (`client_statistics`).
"""

from __future__ import annotations

import dataclasses
import math
import time
import warnings

import numpy as np
import torch

from ..checks import SettingWarning
from ..client.update import client_update, evaluate, predict, set_state, state_tensors
from ..seeding import Stream, derive_seed
from ..client.training import LocalTraining

#: The statistics of the clients' accuracies, each with its prefix: the global model's (``client_``) and,
#: with personalized evaluation, the fine-tuned models' (``personal_``).
STATISTICS = ("acc_mean", "acc_weighted", "acc_std", "acc_min", "acc_worst10", "acc_p10", "share_at_target")
#: The statistics of the global model on the clients that each evaluated row of ``metrics.csv`` gains, in order.
CLIENT_COLUMNS = tuple(f"client_{name}" for name in STATISTICS)
#: The columns of ``clients.csv`` (``personal_accuracy`` and ``personal_loss`` follow with ``personalize_steps``).
CLIENTS_CSV_COLUMNS = ("round", "client", "n", "accuracy", "loss")
PERSONAL_COLUMNS = ("personal_accuracy", "personal_loss")
#: A local test set of fewer samples measures its client's accuracy too coarsely (`warn_small_test_sets`).
SMALL_TEST_SET = 10


class Evaluation:
    """How an engine evaluates its global model after a round: on the test split, and on the clients' test sets.

    Parameters
    ----------
    model : torch.nn.Module
    data : fedsim.data.Dataset
    task : fedsim.client.SingleLabel or fedsim.client.MultiLabel
    partition : partitions.Partition
        Its ``local_test`` are the clients' test sets (indices into the training split).
    state : callable
        Returns the tensors to evaluate (loaded into ``model``), or ``None`` for the model as it is.
    config : fedsim.config.RunConfig, optional
        Its ``personalize_steps`` (and local training settings) make `clients` fine-tune first.
    algorithm : fedsim.algorithms.Algorithm, optional
        A method whose clients have models of their own (`fedsim.algorithms.Algorithm.personal_model`):
        those are evaluated, and fine-tuned, rather than the global model.
    """

    def __init__(self, model, data, task, partition, state, config=None, algorithm=None):
        self.model, self.data, self.task, self.partition, self.state = model, data, task, partition, state
        self.config = config
        self.algorithm = algorithm if algorithm is not None and algorithm.has_personal_models() else None

    def central(self) -> dict:
        """The task's metrics on the test split (`fedsim.client.evaluate`)."""
        return evaluate(self.model, self.state(), self.data, task=self.task)

    def clients(self, round_index: int = 0) -> list[dict]:
        """Each client's ``n``, ``accuracy`` and ``loss`` on its local test set (`evaluate_clients`); with
        ``personalize_steps``, its fine-tuned model's too (`personalize`)."""
        results = evaluate_clients(self.model, self.state(), self.data, task=self.task,
                                   local_test=self.partition.local_test)
        steps = getattr(self.config, "personalize_steps", None)
        if steps or self.algorithm is not None:
            for result, personal in zip(results, self.personalize(steps or 0, round_index)):
                result.update(personal_accuracy=personal["accuracy"], personal_loss=personal["loss"])
        return results

    def personalize(self, steps: int, round_index: int) -> list[dict]:
        """Evaluate each client's own model on its local test set: the method's personal model (or the global
        one), fine-tuned first for ``steps`` local steps on the client's training samples (FedAvg-FT, with the
        run's local optimizer, from a stream of its own) when ``steps`` > 0. The models are thrown away and
        the model object is left as it was."""
        kept = [tensor.detach().clone() for tensor in state_tensors(self.model)]
        state = self.state()
        global_state = kept if state is None else state
        training = dataclasses.replace(LocalTraining.from_config(self.config), epochs=None, local_steps=max(steps, 1))
        seed = derive_seed(self.config.seed, Stream.PERSONALIZE)
        results = []
        try:
            for client, (train, test) in enumerate(zip(self.partition, self.partition.local_test)):
                own = None if self.algorithm is None else self.algorithm.personal_model(client, global_state)
                start = global_state if own is None else own
                if steps and train.size == 0:  # a held-out client: nothing to fine-tune on, nothing measured
                    results.append({"client": client, "n": int(test.size), "accuracy": math.nan, "loss": math.nan})
                    continue
                if steps:
                    client_update(self.model, start, self.data, train, task=self.task, training=training,
                                  seed=seed, round=round_index, client=client, return_delta=False)
                else:
                    set_state(self.model, start)
                results += evaluate_clients(self.model, None, self.data, task=self.task, local_test=[test])
        finally:
            set_state(self.model, kept)
        return results


def evaluate_round(recorder, round_index: int, evaluation: Evaluation | None):
    """Return round ``round_index``'s test metrics and per-client results (each ``None`` when not due) and the
    seconds they took; nothing where this process does not evaluate (``evaluation`` None: a DDP rank but 0)."""
    started = time.perf_counter()
    metrics = clients = None
    if evaluation is not None:
        if recorder.evaluation_due(round_index):
            metrics = evaluation.central()
        if recorder.client_evaluation_due(round_index):
            clients = evaluation.clients(round_index)
    return metrics, clients, time.perf_counter() - started


@torch.no_grad()
def evaluate_clients(model, state, data, *, task, local_test, batch_size: int = 256) -> list[dict]:
    """Return each client's number of samples, accuracy and mean loss on its local test set.

    The local test sets are concatenated and run through the model in one batched pass, as one
    central evaluation of as many samples would be; the per-sample results are then summed by
    client. Evaluating 1,000 clients is not 1,000 small evaluations.

    Parameters
    ----------
    model : torch.nn.Module
    state : list of Tensor or None
        Loaded into ``model`` first when given.
    data : fedsim.data.Dataset
    task : fedsim.client.SingleLabel or fedsim.client.MultiLabel
    local_test : sequence of array_like of int
        Per client, its test samples' indices into the training split.
    batch_size : int, default 256

    Returns
    -------
    list of dict
        ``{"client", "n", "accuracy", "loss"}`` per client, in client order.
    """
    if state is not None:
        set_state(model, state)
    sizes = np.array([len(part) for part in local_test], dtype=np.int64)
    indices = torch.as_tensor(np.concatenate(local_test), dtype=torch.int64)
    labels = data.train_labels[indices].cpu()
    logits = predict(model, data.train_images[indices], data, batch_size)
    owner = torch.as_tensor(np.repeat(np.arange(len(sizes)), sizes))
    correct = torch.bincount(owner, weights=task.correct(logits, labels).double(), minlength=len(sizes))
    loss = torch.bincount(owner, weights=task.loss(logits, labels).double(), minlength=len(sizes))
    return [{"client": client, "n": int(n), "accuracy": float(c / n), "loss": float(l / n)}
            for client, (n, c, l) in enumerate(zip(sizes.tolist(), correct.tolist(), loss.tolist()))]


def client_statistics(clients: list[dict], target: float, key: str = "accuracy", prefix: str = "client_") -> dict:
    """Return the statistics of the clients' accuracies (``key``) that ``metrics.csv`` reports, named with ``prefix``.

    A client whose value is NaN (a held-out client has no samples to fine-tune on) is left out.

    The mean over clients, the mean weighted by their test samples, the (population) standard
    deviation, the minimum, the worst 10% (`worst_tenth_mean`: the mean accuracy of the tenth of
    the clients that fare worst), the 10th percentile (numpy's linear interpolation between the two
    clients around it) and the share of clients at or above ``target``. The percentile stays beside
    the worst 10%, which Non-IID papers report, so that ``metrics.csv`` files and resumed runs that
    hold it keep their column.

    Examples
    --------
    >>> clients = [{"n": n, "accuracy": a} for n, a in [(10, 0.5), (30, 0.9), (20, 0.7), (40, 1.0)]]
    >>> {key: round(value, 4) for key, value in client_statistics(clients, 0.8).items()}
    {'client_acc_mean': 0.775, 'client_acc_weighted': 0.86, 'client_acc_std': 0.192, 'client_acc_min': 0.5, \
'client_acc_worst10': 0.5, 'client_acc_p10': 0.56, 'client_share_at_target': 0.5}
    """
    measured = [client for client in clients if not math.isnan(client[key])]  # a held-out client is not fine-tuned
    accuracy = np.array([client[key] for client in measured], dtype=np.float64)
    n = np.array([client["n"] for client in measured], dtype=np.float64)
    values = (accuracy.mean(), float((accuracy * n).sum() / n.sum()), accuracy.std(), accuracy.min(),
              worst_tenth_mean(accuracy), np.percentile(accuracy, 10), float((accuracy >= target).mean()))
    return {prefix + name: float(value) for name, value in zip(STATISTICS, values)}


def worst_tenth_mean(accuracy) -> float:
    """Return the mean of the ceil(K/10) lowest of K clients' accuracies: the worst 10% of the clients.

    The worst 10% as q-FFL (Li et al., "Fair Resource Allocation in Federated Learning", ICLR
    2020) and Ditto (Li et al., ICML 2021) report it. Unlike the 10th percentile, it is a mean
    over clients: with 20 clients, one at 0 and the rest at 1, it is 0.5 where the percentile
    says 1.0; with fewer than 11 clients it is the worst client's accuracy.

    Examples
    --------
    >>> worst_tenth_mean([1.0] * 19 + [0.0]), worst_tenth_mean([0.9, 0.4, 0.7])
    (0.5, 0.4)
    """
    accuracy = np.sort(np.asarray(accuracy, dtype=np.float64))
    if accuracy.size == 0:
        raise ValueError("`accuracy` must hold at least one client's accuracy, got none")
    return float(accuracy[: math.ceil(accuracy.size / 10)].mean())


def warn_small_test_sets(partition) -> None:
    """Warn, naming how many, when clients' local test sets hold fewer than `SMALL_TEST_SET` samples.

    A client with n test samples scores in steps of 1/n: one with a single sample scores 0 or 1,
    and on its own can set ``client_acc_min`` and pull the worst 10% down, whatever the model is
    worth to it. The lowest of many such noisy scores lies below the clients' true accuracies, so
    small test sets bias the low end of the statistics low; the way out is larger local test
    sets (``local_test_fraction``). Called once per run, when it starts.
    """
    sizes = np.array([len(test) for test in partition.local_test], dtype=np.int64)
    small = int((sizes < SMALL_TEST_SET).sum())
    if not small:
        return
    fraction = partition.params.get("local_test_fraction")
    now = "" if fraction is None else f" (now {fraction:g})"
    clients = "clients has" if small == 1 else "clients have"
    warnings.warn(SettingWarning(
        "{small:text} of {total:text} {clients:text} fewer than {least:text} local test samples (the fewest has "
        "{fewest:text}): such a client's accuracy moves in steps of 1/n, so one unlucky sample can set "
        "`client_acc_min` and pull the worst 10% down; raise {local_test_fraction:name}{now:text} for larger local "
        "test sets", small=small, total=sizes.size, clients=clients, least=SMALL_TEST_SET, fewest=sizes.min(),
        local_test_fraction=fraction, now=now), stacklevel=2)


def round_statistics(clients: list[dict], target: float, holdout=()) -> dict:
    """Return the row statistics of one evaluation on the clients: the global model's, then the personalized.

    With ``holdout`` clients, the statistics are the participating clients'; the unseen ones' mean
    and sample-weighted mean follow, and the participation gap (Yuan et al., ICLR 2022): the
    participating clients' mean accuracy less the unseen clients'.
    """
    held = set(holdout)
    seen = [client for client in clients if client["client"] not in held]
    statistics = client_statistics(seen, target)
    if clients and "personal_accuracy" in clients[0]:
        statistics.update(client_statistics(seen, target, "personal_accuracy", "personal_"))
    if held:
        unseen = client_statistics([client for client in clients if client["client"] in held], target,
                                   prefix="unseen_")
        statistics.update(unseen_acc_mean=unseen["unseen_acc_mean"], unseen_acc_weighted=unseen["unseen_acc_weighted"],
                          participation_gap=statistics["client_acc_mean"] - unseen["unseen_acc_mean"])
    return statistics
