"""fedsim's methods in a Flower user's own app: `fedsim.flower.MethodStrategy` and `ClientMethod`.

The app is ``examples/flower_quickstart``: Flower's PyTorch quickstart (``benchmarks/quickstart_app``)
with a few lines changed. Without Ray, its ServerApp's strategy and its ClientApp's ``train``
function are driven here round by round (half the nodes a round, replies in reverse order,
server lr 0.7) against fedsim's in-process engine; under ``flwr run`` on a simulation SuperLink
it gives `fedsim flower simulate`'s model, in float64 within 1e-10.
"""

import importlib
import random
import sys
from pathlib import Path

import pytest
import torch

from fedsim.config.run_config import RunConfig
from fedsim.engines.inprocess import run
from fedsim.rounds.fedavg import FedAvgRounds

from .numerics import EXACT

APP = Path(__file__).resolve().parents[2] / "examples" / "flower_quickstart"
FEDDYN = str(Path(__file__).resolve().parents[2] / "examples" / "algorithms" / "feddyn.py") + ":FedDyn"
NODES = 4
# the app's run config where the tests set it (its pyproject's defaults otherwise)
ENTRIES = {"batch-size": 10, "local-epochs": 1, "learning-rate": 0.05, "server-lr": 0.7}


@pytest.fixture
def app(monkeypatch):
    """The example app's modules (``quickstart``), imported from its folder and forgotten afterwards."""
    monkeypatch.syspath_prepend(str(APP))
    for name in [name for name in sys.modules if name == "quickstart" or name.startswith("quickstart.")]:
        monkeypatch.delitem(sys.modules, name)
    modules = {name: importlib.import_module(f"quickstart.{name}") for name in ("task", "client_app")}
    yield modules
    for name in [name for name in sys.modules if name == "quickstart" or name.startswith("quickstart.")]:
        del sys.modules[name]


@pytest.fixture
def server_identity(monkeypatch):
    """Give this process the identity of a ServerApp of run 1, which Flower's messages are created with."""
    from flwr.supercore.task_identity import TaskIdentity

    for name in ("_run_id", "_node_id", "_task_id"):
        monkeypatch.setattr(TaskIdentity, name, 1)


class Nodes:
    """Flower's grid as a strategy sees it outside ``Strategy.start``: the nodes online."""

    def __init__(self, count: int):
        self.ids = [1000 + partition for partition in range(count)]

    def get_node_ids(self):
        return list(self.ids)


def fedsim_config(task, method: str, rounds: int, fraction: float = 1.0, **settings) -> RunConfig:
    """The fedsim run the app's settings are: its data, partition and model, the method, the app's training."""
    return RunConfig(**task.SETTINGS, num_partitions=NODES, strategy=method, rounds=rounds, fraction=fraction,
                     batch_size=ENTRIES["batch-size"], local_epochs=ENTRIES["local-epochs"], lr=ENTRIES["learning-rate"],
                     server_lr=ENTRIES["server-lr"], **settings)


def drive(app, method: str, rounds: int, fraction: float, wrapper=None, **settings):
    """Run the app's strategy and ``client_train`` round by round in this process; return the model and the clients
    each round trained (Flower's sampling picks them). ``wrapper`` wraps the strategy (Flower's DP wrappers)."""
    from flwr.app import ArrayRecord, ConfigRecord, Context, RecordDict

    from fedsim.flower import MethodStrategy

    task, client_train = app["task"], app["client_app"].client_train
    strategy = MethodStrategy(method, task.Net(), fraction_train=fraction, fraction_evaluate=0.0,
                              server_lr=ENTRIES["server-lr"], **settings)
    strategy = strategy if wrapper is None else wrapper(strategy)
    grid = Nodes(NODES)
    contexts = {node: Context(run_id=1, node_id=node, node_config={"partition-id": partition, "num-partitions": NODES},
                              state=RecordDict(), run_config=ENTRIES) for partition, node in enumerate(grid.ids)}
    arrays, chosen = ArrayRecord(task.Net().state_dict()), []
    for server_round in range(1, rounds + 1):
        messages = strategy.configure_train(server_round, arrays, ConfigRecord({"lr": ENTRIES["learning-rate"]}),
                                            grid)
        replies = [client_train(message, contexts[message.metadata.dst_node_id]) for message in messages]
        chosen.append(sorted(grid.ids.index(message.metadata.dst_node_id) for message in messages))
        arrays, _ = strategy.aggregate_train(server_round, reversed(replies))  # arrival order does not matter
    state = arrays.to_torch_state_dict()
    return [tensor for tensor in state.values() if tensor.is_floating_point()], chosen


def in_process(monkeypatch, config: RunConfig, chosen: list[list[int]]):
    """fedsim's in-process run of ``config`` with each round's clients those Flower sampled."""
    monkeypatch.setattr(FedAvgRounds, "sampled_clients", lambda rounds, round_index: chosen[round_index])
    return run(config).global_state


@pytest.mark.numerics
@pytest.mark.parametrize("method", ["scaffold", "fednova", FEDDYN])
def test_the_apps_strategy_and_client_give_fedsims_rounds_for_half_the_nodes_a_round(app, server_identity,
                                                                                      monkeypatch, method):
    """Half the nodes a round for 3 rounds, so that some train twice from the state their node kept and the server
    states average over all 4 clients (SCAFFOLD's c, FedDyn's h), not over the round's 2."""
    random.seed(3)  # Flower's FedAvg samples nodes with random.sample
    got, chosen = drive(app, method, rounds=3, fraction=0.5)
    assert any(len(set(chosen[0]) & set(later)) for later in chosen[1:])  # a client came back with its state
    expected = in_process(monkeypatch, fedsim_config(app["task"], method, 3, fraction=0.5), chosen)
    torch.testing.assert_close(got, expected, **EXACT)


def test_server_momentum_and_equal_weights_reach_the_server_step(app, server_identity, monkeypatch):
    random.seed(0)
    got, chosen = drive(app, "fedavg", rounds=2, fraction=0.5, weights="equal", server_momentum=0.5, mu=0.01)
    config = fedsim_config(app["task"], "fedavg", 2, fraction=0.5, weights="equal", server_momentum=0.5, mu=0.01)
    torch.testing.assert_close(got, in_process(monkeypatch, config, chosen), **EXACT)


def test_flowers_server_side_dp_wrapper_clips_a_method_whose_clients_reply_with_the_model_alone(app, server_identity,
                                                                                              monkeypatch):
    """FedNova's clients reply with their model alone (its sums are the server's): Flower's wrapper clips each
    update against the model sent, which a clip far above every update leaves as it was. SCAFFOLD's clients reply
    with their control variates' change too, which the wrapper would clip as part of the model: it raises."""
    from flwr.serverapp.strategy import DifferentialPrivacyServerSideFixedClipping

    def wrapper(strategy):
        return DifferentialPrivacyServerSideFixedClipping(strategy, noise_multiplier=0.0, clipping_norm=1e6,
                                                          num_sampled_clients=NODES)

    got, chosen = drive(app, "fednova", rounds=2, fraction=1.0, wrapper=wrapper)
    expected = in_process(monkeypatch, fedsim_config(app["task"], "fednova", 2), chosen)
    torch.testing.assert_close(got, expected, **EXACT)
    with pytest.raises(ValueError, match="zip"):
        drive(app, "scaffold", rounds=1, fraction=1.0, wrapper=wrapper)


class Defined:
    """A class the nodes could not import: defined inside a function."""

    @staticmethod
    def inside():
        class Local:
            pass

        return Local


def test_bad_strategy_input_is_one_error_naming_what_to_change(app):
    from partitions import SettingError

    from fedsim.flower import MethodStrategy

    model = app["task"].Net()
    with pytest.raises(TypeError, match="not batch_size, lr: your ClientApp's training sets the rest"):
        MethodStrategy("scaffold", model, lr=0.1, batch_size=5)
    with pytest.raises(SettingError, match="`mu`=0.1 does nothing with `strategy`='scaffold'"):
        MethodStrategy("scaffold", model, mu=0.1)
    with pytest.raises(ValueError, match="must be defined at the top level of an importable module"):
        MethodStrategy(Defined.inside(), model)
    with pytest.raises(TypeError, match="MethodStrategy's model must be a torch.nn.Module"):
        MethodStrategy("fednova", model.state_dict())
    # what `fedsim strategies` says in its column "your Flower app"
    with pytest.raises(SettingError, match="'moon''s client term is a loss on each sample .* needs fedsim's client core"):
        MethodStrategy("moon", model)
    with pytest.raises(SettingError, match="'allreduce' takes one gradient step of every client at a time"):
        MethodStrategy("allreduce", model)


def train_message(app, method: str, **settings):
    """A train message of `MethodStrategy` for partition 0, and its node's context."""
    from flwr.app import ArrayRecord, ConfigRecord, Context, RecordDict

    from fedsim.flower import MethodStrategy

    strategy = MethodStrategy(method, app["task"].Net(), fraction_evaluate=0.0, **settings)
    grid = Nodes(NODES)
    message = strategy.configure_train(1, ArrayRecord(app["task"].Net().state_dict()), ConfigRecord({"lr": 0.1}),
                                       grid)[0]
    context = Context(run_id=1, node_id=message.metadata.dst_node_id,
                      node_config={"partition-id": 0, "num-partitions": NODES}, state=RecordDict(), run_config=ENTRIES)
    return message, context


def test_the_client_helper_refuses_what_it_cannot_do_with_the_reason(app, server_identity):
    from flwr.app import ConfigRecord, Context, Message, RecordDict

    from fedsim.flower import ClientMethod

    model = app["task"].Net()
    message, context = train_message(app, "fednova", momentum=0.9)
    with pytest.raises(ValueError, match=r"momentum is 0.0 but the strategy's is `momentum`=0.9"):
        ClientMethod(message, context, model).wrap(torch.optim.SGD(model.parameters(), lr=0.1))
    message, context = train_message(app, "scaffold")
    with pytest.raises(RuntimeError, match=r"optimizer was not wrapped: call method.wrap\(optimizer\)"):
        ClientMethod(message, context, model).reply({"num-examples": 5})
    method = ClientMethod(message, context, model)
    method.wrap(torch.optim.SGD(model.parameters(), lr=0.1))
    with pytest.raises(ValueError, match="the client took no optimizer step"):
        method.reply({"num-examples": 5})
    with pytest.raises(ValueError, match="lacks 'num-examples'"):
        method.reply({"train_loss": 1.0})
    plain = Message(RecordDict({"arrays": message.content["arrays"], "config": ConfigRecord({"lr": 0.1})}),
                    dst_node_id=1, message_type="train")
    with pytest.raises(ValueError, match="ClientMethod serves a fedsim.flower.MethodStrategy's rounds"):
        ClientMethod(plain, Context(run_id=1, node_id=1, node_config={}, state=RecordDict(), run_config={}), model)


def test_a_reply_follows_flowers_conventions_so_its_fedavg_could_read_it(app, server_identity):
    """One ArrayRecord (the state_dict, the method's reply tensors under prefixed keys), one MetricRecord with
    num-examples; the broadcast state travels in its own record, so the model's stays a state_dict."""
    from flwr.serverapp.strategy.strategy_utils import validate_message_reply_consistency

    message, context = train_message(app, "scaffold")
    model = app["task"].Net()
    assert set(message.content["arrays"].keys()) == set(model.state_dict())
    assert "fedsim.broadcast" in message.content
    reply = app["client_app"].client_train(message, context)
    validate_message_reply_consistency([reply.content, reply.content], "num-examples", check_arrayrecord=True)
    extras = [key for key in reply.content["arrays"].keys() if key not in model.state_dict()]
    # SCAFFOLD's dc_k, a tensor per parameter
    assert extras == [f"fedsim-extra.{index}" for index in range(len(list(model.parameters())))]
    assert reply.content["metrics"]["partition-id"] == 0 and reply.content["metrics"]["num-steps"] > 0
    assert "fedsim-client-state" in context.state  # c_k, for the node's next round


@pytest.mark.slow  # its arithmetic is the in-process drive's, which the numerics reruns cover
def test_the_app_under_flwr_run_gives_fedsim_flower_simulates_model(tmp_path):
    """SCAFFOLD, FedNova and FedDyn in the example app, each submitted with ``flwr run`` to one simulation
    SuperLink: the model of each equals fedsim's in float64; SCAFFOLD's is run by ``fedsim flower simulate`` too
    (which equals the in-process engine for the others in test_flower.py and test_references.py)."""
    from fedsim.engines.flower import simulate
    from fedsim.engines.flower.federation import LocalFederation, tail

    sys.path.insert(0, str(APP))
    try:
        task = importlib.import_module("quickstart.task")
    finally:
        sys.path.remove(str(APP))
        for name in [name for name in sys.modules if name == "quickstart" or name.startswith("quickstart.")]:
            del sys.modules[name]
    rounds, got = 2, {}
    with LocalFederation(NODES, simulation=True, num_cpus=2) as federation:
        for method in ("scaffold", "fednova", FEDDYN):
            result = tmp_path / f"result-{len(got)}.json"
            log = tmp_path / f"flower-{len(got)}.log"
            entries = {**ENTRIES, "method": method, "num-server-rounds": rounds, "result-file": str(result)}
            with log.open("w") as stream:
                status = federation.run(entries, stream=stream, app_folder=APP)
            assert status == 0 and result.exists(), tail(log)
            state = torch.load(f"{result}.model.pt", weights_only=True)
            got[method] = [tensor for tensor in state.values() if tensor.is_floating_point()]
    for method, model in got.items():
        torch.testing.assert_close(model, run(fedsim_config(task, method, rounds)).global_state, **EXACT)
    simulated = simulate(fedsim_config(task, "scaffold", rounds), tmp_path / "simulated")
    torch.testing.assert_close(got["scaffold"], simulated.global_state, **EXACT)
