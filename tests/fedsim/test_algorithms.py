"""SCAFFOLD, FedNova and MOON against their papers' update rules, worked by hand on a tiny run (float64)."""

import pytest
import torch
from torch.nn import functional as F

from fedsim.build import RunSetup
from fedsim.client import client_update, get_state
from fedsim.config import RunConfig
from fedsim.engines.distributed.launch import check_world_size
from fedsim.engines.inprocess import run
from fedsim.moon import representation_layer
from fedsim.models import create_model, list_models
from fedsim.seeding import torch_generator
from fedsim.training import LocalTraining, training_batch

from .numerics import EXACT

LR, STEPS = 0.1, 3
# 3 clients of uneven size; a batch larger than any shard makes each local step a full-shard step
FULL_BATCH = {"dataset": "digits", "model": "mlp", "num_partitions": 3, "partition": "dirichlet", "alpha": 0.5,
              "rounds": 2, "local_steps": STEPS, "batch_size": 2000, "lr": LR, "dtype": "float64"}


def shard_batch(setup, client):
    """The client's whole shard as one training batch (no augmentation, no noise on digits)."""
    indices = torch.as_tensor(setup.partition.shard(client), dtype=torch.int64)
    return training_batch(setup.data, indices, torch_generator(0), 0.0, torch.device("cpu"), torch.float64)


def sgd_steps(model, inputs, targets, *, steps, after_step=None, extra_loss=None):
    """Plain SGD steps of the shard's mean cross-entropy (plus ``extra_loss``); ``after_step`` edits the parameters."""
    params = list(model.parameters())
    for _ in range(steps):
        loss = F.cross_entropy(model(inputs), targets)
        if extra_loss is not None:
            loss = loss + extra_loss(model, inputs)
        grads = torch.autograd.grad(loss, params)
        with torch.no_grad():
            for param, grad in zip(params, grads):
                param -= LR * grad
            if after_step is not None:
                after_step(params)


def averaged(setup, x, trained):
    """FedAvg's server step with lr 1: x + sum_k p_k (y_k - x), p_k = n_k / n."""
    sizes = [len(setup.partition.shard(k)) for k in range(len(trained))]
    return [xi + sum(n / sum(sizes) * (y[i] - xi) for n, y in zip(sizes, trained)) for i, xi in enumerate(x)]


def test_scaffold_follows_option_two_and_its_first_round_is_fedavg(tmp_path):
    config = RunConfig(strategy="scaffold", **FULL_BATCH)
    setup = RunSetup.build(config)
    model, clients = setup.model, range(config.num_partitions)
    x = get_state(model)
    c = [torch.zeros_like(p) for p in x]
    c_k = {k: [torch.zeros_like(p) for p in x] for k in clients}
    for _ in range(config.rounds):
        trained, changes = [], []
        for k in clients:
            with torch.no_grad():
                for param, value in zip(model.parameters(), x):
                    param.copy_(value)
            correction = [ci - cki for ci, cki in zip(c, c_k[k])]

            def corrected(params, correction=correction):
                for param, term in zip(params, correction):
                    param -= LR * term

            sgd_steps(model, *shard_batch(setup, k), steps=STEPS, after_step=corrected)
            y = get_state(model)
            new = [cki - ci + (xi - yi) / (STEPS * LR) for cki, ci, xi, yi in zip(c_k[k], c, x, y)]
            changes.append([a - b for a, b in zip(new, c_k[k])])
            c_k[k] = new
            trained.append(y)
        x = averaged(setup, x, trained)
        c = [ci + sum(change[i] for change in changes) / len(clients) for i, ci in enumerate(c)]

    scaffold = run(config)
    torch.testing.assert_close(scaffold.global_state, x, **EXACT)
    # with every control variate still zero, the first round is FedAvg's
    first = run(config.replace(rounds=1)).global_state
    torch.testing.assert_close(first, run(config.replace(rounds=1, strategy="fedavg", local_steps=STEPS)).global_state,
                               rtol=0, atol=0)
    # the control variates travel both ways: twice FedAvg's bytes for a model without buffers
    fedavg = run(config.replace(strategy="fedavg", local_steps=STEPS, rounds=1))
    assert scaffold.rows[0]["bytes_up"] == 2 * fedavg.rows[0]["bytes_up"]
    # the control variates are in the checkpoint: 1 round, resumed to 2, is the straight run
    run(config.replace(rounds=1), tmp_path / "s")
    torch.testing.assert_close(run(config, tmp_path / "s", resume=True).global_state, scaffold.global_state, **EXACT)


def momentum_steps(num_steps: int, rho: float) -> float:
    """FedNova's a_k with heavy-ball momentum, as the sum of its per-step weights sum_j (1 - rho^j) / (1 - rho)."""
    return sum((1 - rho**j) / (1 - rho) for j in range(1, num_steps + 1))


def test_fednova_normalises_by_local_steps_and_equal_steps_are_fedavg():
    # batches of 10 over shards of different sizes: clients take different numbers of steps
    config = RunConfig(strategy="fednova", dataset="digits", model="mlp", num_partitions=3, partition="dirichlet",
                       alpha=0.5, rounds=2, batch_size=10, lr=0.05, momentum=0.5, dtype="float64")
    setup = RunSetup.build(config)
    training = LocalTraining.from_config(config)
    x = get_state(setup.model)
    sizes = [len(setup.partition.shard(k)) for k in range(3)]
    p = [n / sum(sizes) for n in sizes]
    for round_index in range(config.rounds):
        updates = [client_update(setup.model, x, setup.data, setup.partition.shard(k), task=setup.task,
                                 training=training, seed=config.seed, round=round_index, client=k) for k in range(3)]
        a = [momentum_steps(update.num_steps, config.momentum) for update in updates]
        assert len({update.num_steps for update in updates}) > 1
        tau_eff = sum(pk * ak for pk, ak in zip(p, a))
        d = [sum(pk * -u.delta[i] / ak for pk, u, ak in zip(p, updates, a)) for i in range(len(x))]
        x = [xi - tau_eff * di for xi, di in zip(x, d)]
    torch.testing.assert_close(run(config).global_state, x, **EXACT)

    equal = RunConfig(strategy="fednova", **FULL_BATCH)
    torch.testing.assert_close(run(equal).global_state, run(equal.replace(strategy="fedavg")).global_state, **EXACT)


MU, TEMPERATURE = 2.0, 0.5


def contrastive(global_model, previous_model):
    """MOON's l_con on the 2NN by hand: its representation is the output of every layer but the last."""

    def loss(model, inputs):
        z = model[:-1](inputs)
        with torch.no_grad():
            z_glob, z_prev = global_model[:-1](inputs), previous_model[:-1](inputs)
        positive = torch.exp(F.cosine_similarity(z, z_glob, dim=-1) / TEMPERATURE)
        negative = torch.exp(F.cosine_similarity(z, z_prev, dim=-1) / TEMPERATURE)
        return MU * (-torch.log(positive / (positive + negative))).mean()

    return loss


def loaded(config, setup, state):
    """A frozen copy of the model holding ``state``, in eval mode."""
    model = create_model("mlp", num_classes=10, in_channels=1, image_size=setup.data.train_images.shape[-1])
    model = model.to(torch.float64).eval().requires_grad_(False)
    with torch.no_grad():
        for param, value in zip(model.parameters(), state):
            param.copy_(value)
    return model


def test_moon_adds_the_model_contrastive_loss_from_the_second_round(tmp_path):
    config = RunConfig(strategy="moon", moon_mu=MU, moon_temperature=TEMPERATURE, **FULL_BATCH)
    setup = RunSetup.build(config)
    model = setup.model
    x, previous = get_state(model), {}
    for _ in range(config.rounds):
        trained = []
        for k in range(config.num_partitions):
            with torch.no_grad():
                for param, value in zip(model.parameters(), x):
                    param.copy_(value)
            extra = None if k not in previous else contrastive(loaded(config, setup, x),
                                                               loaded(config, setup, previous[k]))
            sgd_steps(model, *shard_batch(setup, k), steps=STEPS, extra_loss=extra)
            previous[k] = trained_k = get_state(model)
            trained.append(trained_k)
        x = averaged(setup, x, trained)

    moon = run(config)
    torch.testing.assert_close(moon.global_state, x, **EXACT)
    first = run(config.replace(rounds=1)).global_state  # no client has a previous model yet: FedAvg
    torch.testing.assert_close(first, run(config.replace(rounds=1, strategy="fedavg", local_steps=STEPS)).global_state,
                               rtol=0, atol=0)
    run(config.replace(rounds=1), tmp_path / "m")
    torch.testing.assert_close(run(config, tmp_path / "m", resume=True).global_state, moon.global_state, **EXACT)


@pytest.mark.parametrize("name", list_models())
def test_moon_representation_is_the_input_of_the_classifier_layer(name):
    size = 224 if name in ("swin-tiny",) else 32
    model = create_model(name, num_classes=7, in_channels=3, image_size=size).eval()
    layer = representation_layer(model)
    seen = {}
    layer.register_forward_hook(lambda module, inputs, output: seen.update(output=output))
    with torch.no_grad():
        logits = model(torch.randn(2, 3, size, size))
    assert layer.out_features == 7 and torch.equal(seen["output"], logits)


def test_scaffold_and_fednova_learn_under_two_classes_per_client(mnist5k):
    # the benchmark grid's quick preset (benchmarks/compare_strategies.py) at #C=2
    shared = RunConfig(dataset="mnist-5k", model="mlp", partition="pathological", classes_per_partition=2,
                       num_partitions=10, rounds=15, batch_size=10, lr=0.05)
    accuracy = {name: run(shared.replace(strategy=name), data=mnist5k).summary["final_test_accuracy"]
                for name in ("fedavg", "scaffold", "fednova")}
    # observed: fedavg 0.826, fednova 0.778 (it weighs these uneven shards' clients nearly equally)
    assert accuracy["fedavg"] > 0.75
    assert accuracy["scaffold"] >= accuracy["fedavg"] - 0.06 and accuracy["fednova"] >= accuracy["fedavg"] - 0.06


@pytest.mark.parametrize("settings, message", [
    ({"strategy": "fedavg", "moon_mu": 5.0}, "`moon_mu`=5.0 does nothing with `strategy`='fedavg'"),
    ({"strategy": "scaffold", "mu": 0.01}, "`mu`=0.01 does nothing with `strategy`='scaffold'"),
    ({"strategy": "moon", "moon_temperature": 0.0}, "`moon_temperature`"),
])
def test_a_setting_the_algorithm_does_not_read_is_refused(settings, message):
    with pytest.raises(ValueError, match=message):
        RunConfig(dataset="digits", model="mlp", **settings)


@pytest.mark.parametrize("strategy", ["scaffold", "moon"])
def test_ddp_refuses_scaffold_and_moon_whose_clients_keep_a_state(strategy):
    config = RunConfig(strategy=strategy, dataset="digits", model="mlp")
    with pytest.raises(ValueError, match=f"`strategy`='{strategy}' keeps a state on each client"):
        check_world_size(config, 2)


def test_a_checkpoint_without_the_clients_states_is_not_resumed():
    """A Flower server's clients keep their states on their nodes: its checkpoint cannot restart them."""
    from fedsim.engines.inprocess.fedavg import FedAvgRounds

    config = RunConfig(strategy="moon", dataset="digits", model="mlp", num_partitions=2)
    setup = RunSetup.build(config)
    server = FedAvgRounds(config, setup.model, setup.data, setup.task, setup.partition)
    server.algorithm.holds_client_states = False
    with pytest.raises(ValueError, match="cannot continue them; start a new run"):
        FedAvgRounds(config, setup.model, setup.data, setup.task, setup.partition).load_state_dict(server.state_dict())
