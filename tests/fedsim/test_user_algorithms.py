"""A user's algorithms through the public API (`examples/algorithms/`), against their papers' rules by hand (float64).

The examples are imported by reference, as a user names them (``path/to/file.py:Name``), never
from fedsim's package.
"""

import ast
from pathlib import Path

import pytest
import torch

from fedsim.algorithms import algorithm_class
from fedsim.algorithms.declared import check_declared
from fedsim.build import RunSetup
from fedsim.client import get_state
from fedsim.config.run_config import RunConfig
from fedsim.engines.distributed.launch import check_world_size
from fedsim.engines.inprocess import run
from fedsim.engines.inprocess.parallel import check_workers
from fedsim.schedule import holdout_of, sample_clients, sample_participants

from .numerics import EXACT
from .test_algorithms import FULL_BATCH, STEPS, load, sgd_steps, shard_batch

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "algorithms"
MEDIAN, TRIMMED = f"{EXAMPLES}/robust.py:Median", f"{EXAMPLES}/robust.py:TrimmedMean"
FEDDYN = f"{EXAMPLES}/feddyn.py:FedDyn"
# 5 clients, 3 or 4 of them a round, and a server step of 0.7: a mean in place of the median, or
# a rule that ignores the global step size, lands elsewhere
ROBUST = {**FULL_BATCH, "num_partitions": 5, "fraction": 0.8, "server_lr": 0.7}


def trained_models(setup, x, clients, extra_loss=None):
    """Each client's model after STEPS full-shard SGD steps from ``x``."""
    trained = []
    for k in clients:
        load(setup.model, x)
        sgd_steps(setup.model, [shard_batch(setup, k)] * STEPS, extra_loss=extra_loss)
        trained.append(get_state(setup.model))
    return trained


def robust_by_hand(config, combine):
    """The global model after ``config.rounds`` rounds whose server combines the trained models with ``combine``."""
    setup = RunSetup.build(config)
    x = get_state(setup.model)
    for round_index in range(config.rounds):
        clients = sample_clients(config.num_partitions, config.fraction, config.seed, round_index).tolist()
        trained = trained_models(setup, x, clients)
        combined = [combine(torch.stack([y[i] for y in trained])) for i in range(len(x))]
        x = [xi + config.server_lr * (ci - xi) for xi, ci in zip(x, combined)]
    return x


def median(values):
    """The median along the first axis; for an even count, the mean of the two middle values."""
    ordered, count = values.sort(dim=0).values, values.shape[0]
    return (ordered[(count - 1) // 2] + ordered[count // 2]) / 2


@pytest.mark.numerics
def test_the_median_and_the_trimmed_mean_follow_yins_rules():
    config = RunConfig(strategy=MEDIAN, **ROBUST)
    assert [len(sample_clients(5, 0.8, 0, r)) for r in range(2)] == [4, 4]  # an even count: two middle values
    torch.testing.assert_close(run(config).global_state, robust_by_hand(config, median), **EXACT)
    # beta = 0.25 of 4 values drops the largest and the smallest: the mean of the middle two, here the median too;
    # with 5 clients a round it is the mean of the middle three
    trimmed = RunConfig(strategy=TRIMMED, algorithm_options={"beta": 0.25}, **{**ROBUST, "fraction": 1.0})
    expected = robust_by_hand(trimmed, lambda values: values.sort(dim=0).values[1:4].mean(dim=0))
    torch.testing.assert_close(run(trimmed).global_state, expected, **EXACT)
    assert run(trimmed).rows[-1]["strategy"] == "trimmed-mean"


def test_aggregate_is_told_each_models_client_and_its_shard_size_in_the_order_of_the_models(monkeypatch):
    median, told = algorithm_class(MEDIAN), []
    combine = median.aggregate

    def recorded(self, models, weights, global_state, clients):
        told.append(clients)
        for model, (client, _) in zip(models, clients):  # each model is its client's: trained from the same start
            assert model is not None and isinstance(client, int)
        return combine(self, models, weights, global_state, clients)

    monkeypatch.setattr(median, "aggregate", recorded)
    config = RunConfig(strategy=MEDIAN, **{**ROBUST, "rounds": 2})
    run(config)
    sizes = RunSetup.build(config).partition.sizes
    expected = [[(int(client), int(sizes[client])) for client in sorted(sample_clients(5, 0.8, 0, r))]
                for r in range(2)]
    assert told == expected and all(size > 0 for clients in told for _, size in clients)


def test_an_aggregate_that_does_not_take_the_rounds_clients_is_refused_when_the_class_is_made():
    from fedsim.algorithms import Algorithm

    with pytest.raises(TypeError, match=r"Old.aggregate must take \(models, weights, global_state, clients\)"):
        type("Old", (Algorithm,), {"aggregate": lambda self, models, weights, global_state: global_state})


@pytest.mark.parametrize("count, beta, dropped", [
    (100, 0.29, 29),  # 0.29 * 100 is 28.999999999999996 in floating point
    (180, 0.35, 63),  # 62.99999999999999
    (10, 0.1, 1), (7, 0.3, 2), (8, 0.2, 1), (5, 0.25, 1), (4, 0.2, 0), (3, 0.49, 1),
])
def test_the_trimmed_mean_drops_floor_beta_m_values_at_each_end_counted_exactly(count, beta, dropped):
    """Values k^2 in a shuffled order: each count dropped gives another mean of what is left."""
    trimmed = algorithm_class(TRIMMED)(RunConfig(strategy=TRIMMED, algorithm_options={"beta": beta}),
                                       torch.nn.Linear(1, 1, bias=False), [torch.zeros(1, 1, dtype=torch.float64)])
    order = torch.randperm(count, generator=torch.Generator().manual_seed(count))
    models = [[torch.full((1, 1), float(k * k), dtype=torch.float64)] for k in order.tolist()]
    clients = [(client, 1) for client in range(count)]
    (combined,) = trimmed.aggregate(models, [1 / count] * count, [torch.zeros(1, 1, dtype=torch.float64)], clients)
    kept = range(dropped, count - dropped)
    assert combined.item() == pytest.approx(sum(k * k for k in kept) / len(kept), rel=1e-12)


@pytest.mark.numerics
@pytest.mark.parametrize("population", [
    {"num_partitions": 4},
    # 1 of 5 clients held out, never trained: h's mean is over the other m = 4
    {"num_partitions": 5, "holdout_clients": 0.2, "local_test_fraction": 0.25},
], ids=["all-train", "one-held-out"])
def test_feddyn_follows_its_papers_client_and_server_rules(tmp_path, population):
    alpha = 0.1
    config = RunConfig(strategy=FEDDYN, algorithm_options={"alpha": alpha}, weights="equal",
                       **{**FULL_BATCH, **population, "fraction": 0.5, "rounds": 3, "server_lr": 0.7})
    setup = RunSetup.build(config)
    x = get_state(setup.model)
    held = holdout_of(setup.partition)
    assert len(held) == (1 if config.holdout_clients else 0)
    m = config.num_partitions - len(held)
    gradients = {k: [torch.zeros_like(p) for p in x] for k in range(config.num_partitions)}
    h = [torch.zeros_like(p) for p in x]
    for round_index in range(config.rounds):
        clients = sample_participants(config.num_partitions, config.fraction, config.seed, round_index, held)
        trained = []
        for k in clients:
            def dynamic(model, inputs, g=gradients[k], anchor=x):
                params = list(model.parameters())
                return (-sum((gi * v).sum() for gi, v in zip(g, params))
                        + alpha / 2 * sum(((v - w) ** 2).sum() for v, w in zip(params, anchor)))

            (y,) = trained_models(setup, x, [k], extra_loss=dynamic)
            gradients[k] = [gi - alpha * (yi - xi) for gi, yi, xi in zip(gradients[k], y, x)]
            trained.append(y)
        h = [hi - alpha / m * sum(y[i] - x[i] for y in trained) for i, hi in enumerate(h)]
        target = [sum(y[i] for y in trained) / len(trained) - h[i] / alpha for i in range(len(x))]
        x = [xi + config.server_lr * (ti - xi) for xi, ti in zip(x, target)]

    feddyn = run(config)
    torch.testing.assert_close(feddyn.global_state, x, **EXACT)
    # h and every client's g_k are in the checkpoint: 1 round, resumed to 3, is the straight run
    run(config.replace(rounds=1), tmp_path / "d")
    torch.testing.assert_close(run(config, tmp_path / "d", resume=True).global_state, feddyn.global_state, **EXACT)


def test_capabilities_are_declared_by_the_class_and_read_by_the_engines():
    assert not algorithm_class(MEDIAN).linear and not algorithm_class(MEDIAN).needs_client_loop
    assert algorithm_class(FEDDYN).stateful_clients and algorithm_class(FEDDYN).needs_client_loop
    with pytest.raises(ValueError, match="other than by a weighted sum .* leave `workers` out"):
        check_workers(2, RunConfig(strategy=MEDIAN))
    check_workers(1, RunConfig(strategy=MEDIAN))
    with pytest.raises(ValueError, match="keeps a state on each client between rounds: leave `workers` out"):
        check_workers(2, RunConfig(strategy=FEDDYN))
    with pytest.raises(ValueError, match="other than by a weighted sum.*fedsim ddp"):
        check_world_size(RunConfig(strategy=MEDIAN, num_partitions=2), 2)
    with pytest.raises(ValueError, match="keeps a state on each client.*fedsim ddp"):
        check_world_size(RunConfig(strategy=FEDDYN, num_partitions=2), 2)


def code_lines(path: Path) -> list[str]:
    """Return the lines of code of the Python file at ``path``: neither blank, a comment nor a docstring."""
    source = path.read_text()
    documented = {line for node in ast.walk(ast.parse(source))
                  if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef)) and ast.get_docstring(node)
                  for line in range(node.body[0].lineno, node.body[0].end_lineno + 1)}
    return [line for number, line in enumerate(source.splitlines(), 1)
            if line.strip() and not line.strip().startswith("#") and number not in documented]


def test_feddyn_declares_its_state_and_writes_no_transport_or_checkpoint_code():
    lines = code_lines(Path(FEDDYN.split(":")[0]))
    assert len(lines) <= 30
    transport = ("def reply", "def add_reply", "def broadcast", "def state_dict", "def load_state_dict", "def sums")
    assert not [line for line in lines if line.strip().startswith(transport)]


FORGETFUL = """
import torch
from fedsim.algorithms import Algorithm


class Forgetful(Algorithm):
    \"\"\"Adds each client's change to a sum of its own, in a plain list: no engine would carry it.\"\"\"

    def __init__(self, config, model, global_state):
        super().__init__(config, model, global_state)
        self.change_sum = [torch.zeros_like(tensor) for tensor in global_state]

    def after_client(self, client, global_state, trained, num_steps):
        torch._foreach_add_(self.change_sum, torch._foreach_sub(trained, global_state))
"""


def test_a_method_whose_clients_add_to_an_undeclared_sum_is_refused_naming_it(tmp_path):
    (tmp_path / "forgetful.py").write_text(FORGETFUL)
    config = RunConfig(strategy=f"{tmp_path / 'forgetful.py'}:Forgetful", dataset="digits", model="mlp")
    with pytest.raises(TypeError, match=r"Forgetful.change_sum holds tensors .* declare it: a RoundSum"):
        run(config)
    # FedDyn's own sum, undeclared, is refused too; declared, it is carried
    setup = RunSetup.build(RunConfig(strategy=FEDDYN, dataset="digits", model="mlp"))
    feddyn = algorithm_class(FEDDYN)(RunConfig(strategy=FEDDYN), setup.model, get_state(setup.model))
    check_declared(feddyn)
    feddyn.change_sum = list(feddyn.change_sum)
    with pytest.raises(TypeError, match=r"FedDyn.change_sum holds tensors"):
        check_declared(feddyn)


@pytest.mark.parametrize("options, message", [
    ({"beta": 0.6}, r"`algorithm option beta` must be .*0.5"),
    ({"beta": "x"}, r"`algorithm option beta` must be a number"),
    ({"gamma": 1}, r"sets 'gamma', but `strategy`='trimmed-mean' has no such option; its options: beta"),
])
def test_a_bad_algorithm_option_is_refused_naming_it(options, message):
    with pytest.raises((ValueError, TypeError), match=message):
        RunConfig(strategy=TRIMMED, algorithm_options=options)


def test_an_option_for_a_method_that_declares_none_is_refused():
    with pytest.raises(ValueError, match="sets 'beta', but `strategy`='fedavg' declares no options"):
        RunConfig(strategy="fedavg", algorithm_options={"beta": 0.1})


FEDBN = f"{EXAMPLES}/fedbn.py:FedBN"


@pytest.mark.numerics
def test_fedbn_trains_each_client_with_its_own_batchnorm_and_combines_every_tensor_into_the_global_model(tmp_path):
    """Clients 1 and 2 train twice (rounds 1 and 3, rounds 1 and 2): from their own BatchNorm the second time.

    Clients 0 and 3 first train in rounds 2 and 3, from the global model's BatchNorm: the
    combination of the clients' before them. Each client's own model (the global one with its
    BatchNorm) is evaluated on its local test set.
    """
    from fedsim.client import evaluate, set_state, state_tensors
    from fedsim.results.folder import read_rows

    config = RunConfig(strategy=FEDBN, **{**FULL_BATCH, "model": "cnn", "norm": "batch", "num_partitions": 4,
                                          "fraction": 0.5, "rounds": 3, "server_lr": 0.7,
                                          "local_test_fraction": 0.25})
    setup = RunSetup.build(config)
    model = setup.model
    x = get_state(model)
    num_params = len(list(model.parameters()))
    norms = [i for i, tensor in enumerate(state_tensors(model)) if tensor.ndim == 1 and any(
        tensor is t for m in model.modules() if isinstance(m, torch.nn.BatchNorm2d) for t in [*m.parameters(),
                                                                                            *m.buffers()])]
    assert norms  # the model has BatchNorm
    assert [sample_clients(4, config.fraction, config.seed, r).tolist() for r in range(3)] == [[1, 2], [0, 2], [1, 3]]
    own = {}
    for round_index in range(config.rounds):
        clients = sample_clients(4, config.fraction, config.seed, round_index).tolist()
        trained = []
        for k in clients:
            set_state(model, x)
            if k in own:
                with torch.no_grad():
                    for i, tensor in zip(norms, own[k]):
                        state_tensors(model)[i].copy_(tensor)
            sgd_steps(model, [shard_batch(setup, k)] * STEPS)
            y = get_state(model)
            own[k] = [y[i] for i in norms]
            trained.append(y)
        sizes = [len(setup.partition.shard(k)) for k in clients]
        # every tensor, BatchNorm's too, is combined into the global model: the server step moves the
        # parameters, the buffers (running statistics) take the mean; a client takes back only its own
        mean = [sum(n / sum(sizes) * y[i] for n, y in zip(sizes, trained)) for i in range(len(x))]
        x = [xi + config.server_lr * (mi - xi) if i < num_params else mi for i, (xi, mi) in enumerate(zip(x, mean))]
    torch.testing.assert_close(run(config, tmp_path / "fedbn").global_state, x, **EXACT)
    last = [row for row in read_rows(tmp_path / "fedbn" / "clients.csv") if row["round"] == config.rounds]
    for k, row in enumerate(last):
        set_state(model, x)
        with torch.no_grad():
            for i, tensor in zip(norms, own.get(k, [])):  # a client never sampled holds the global model
                state_tensors(model)[i].copy_(tensor)
        by_hand = evaluate(model, None, setup.data, task=setup.task, split="train",
                           indices=setup.partition.local_test[k])
        assert abs(row["personal_loss"] - by_hand["loss"]) < 1e-10 and row["personal_accuracy"] == pytest.approx(
            by_hand["accuracy"], abs=1e-12), k
    assert any(abs(row["personal_loss"] - row["loss"]) > 1e-6 for row in last)  # their own BatchNorm counted
    with pytest.raises(ValueError, match="evaluates each client's own model, whose personal parts live on its"):
        from fedsim.engines.flower import check_flower_config
        check_flower_config(config)
    with pytest.raises(ValueError, match="`strategy`='fedbn' keeps BatchNorm local, but `model`='mlp' has none"):
        run(config.replace(model="mlp", norm=None))


def test_a_fedopt_run_is_named_for_what_ran_in_every_table(tmp_path):
    from fedsim.comparison import compare
    from fedsim.results.folder import read_rows

    config = RunConfig(dataset="digits", model="mlp", num_partitions=3, rounds=1, batch_size=50)
    results = compare(config, ["fedavg", "fedadam", "scaffold"], tmp_path / "c", quiet=True)
    assert list(results) == ["fedavg", "fedadam", "scaffold"]
    assert {row["strategy"] for row in read_rows(tmp_path / "c" / "metrics.csv")} == {"fedavg", "fedadam", "scaffold"}
    assert "fedadam" in (tmp_path / "c" / "comparison.txt").read_text() and (tmp_path / "c" / "fedadam").is_dir()
    # one server optimizer for every strategy: the table says so in each name
    adam = compare(config.replace(server_optimizer="adam", server_lr=0.01), ["fedavg", "scaffold"], tmp_path / "a",
                   quiet=True)
    assert list(adam) == ["fedadam", "scaffold+fedadam"]
    with pytest.raises(ValueError, match="two of `strategies` both run 'fedadam'"):
        compare(config.replace(server_optimizer="adam"), ["fedavg", "fedadam"], tmp_path / "b", quiet=True)


class Projected(torch.nn.Module):
    """A user's model with MOON's projection head: ``representation`` is the head's output, not the logits' input."""

    def __init__(self):
        super().__init__()
        self.body = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(64, 16), torch.nn.ReLU())
        self.head, self.classifier = torch.nn.Linear(16, 5), torch.nn.Linear(16, 10)

    def forward(self, inputs):
        return self.classifier(self.body(inputs))

    def representation(self, inputs):
        return self.head(self.body(inputs))


def test_moon_contrasts_a_users_representation_method_where_the_model_has_one():
    from fedsim.algorithms.moon import ModelContrast

    torch.manual_seed(0)
    model, other = Projected().double(), Projected().double()
    contrast = ModelContrast(model, mu=2.0, temperature=0.5).for_client(get_state(other), get_state(model))
    inputs = torch.randn(3, 1, 8, 8, dtype=torch.float64)
    with contrast.training(model):
        got = contrast.sample_loss(inputs, model(inputs))
    z, z_glob, z_prev = model.representation(inputs), other.representation(inputs), model.representation(inputs)
    positive = torch.exp(torch.nn.functional.cosine_similarity(z, z_glob) / 0.5)
    negative = torch.exp(torch.nn.functional.cosine_similarity(z, z_prev) / 0.5)
    torch.testing.assert_close(got, -2.0 * torch.log(positive / (positive + negative)), **EXACT)
    assert got.requires_grad  # it trains the head too


def test_moon_refuses_a_model_with_neither_a_linear_layer_nor_a_representation():
    from fedsim.algorithms import Moon

    model = torch.nn.Sequential(torch.nn.Conv2d(1, 10, 8), torch.nn.Flatten())
    with pytest.raises(ValueError, match="Sequential has no linear layer whose input could serve as MOON's"):
        Moon(RunConfig(strategy="moon"), model, get_state(model))
