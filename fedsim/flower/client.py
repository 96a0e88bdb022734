"""`ClientMethod`: a fedsim method's client side around a Flower user's own training loop."""

from __future__ import annotations

import torch
from flwr.app import Context, Message, MetricRecord, RecordDict

from ..algorithms import LocalTerms, round_algorithm
from ..checks import SettingError
from ..client.update import add_gradients, state_tensors
from ..engines.flower.client_app import begin_client, end_client
from ..engines.flower.records import extra_tensors, from_record, state_names, to_record
from ..rounds.hooks import checked_terms
from ..support import check_runs_on
from .messages import BROADCAST_RECORD, METHOD_ENTRY, PARTITION_METRIC, STEPS_METRIC, from_settings_entry


class ClientMethod:
    """The client's side of a `fedsim.flower.MethodStrategy` round, in an ``@app.train()`` function.

    Made from the train message once the model holds the global weights; `wrap` the training
    loop's optimizer with it, train as usual, and return `reply`::

        method = ClientMethod(msg, context, model)
        optimizer = method.wrap(torch.optim.SGD(model.parameters(), lr=lr))
        ...  # the loop: zero_grad, loss.backward(), optimizer.step()
        return method.reply({"train_loss": loss, "num-examples": len(trainloader.dataset)})

    The wrapped optimizer's ``step`` adds the method's penalty gradient before the step (FedProx's
    ``mu (w - w_t)``, FedDyn's terms) and applies its correction after it (SCAFFOLD's
    ``w -= lr (c - c_k)``), and counts the steps (FedNova's ``a_k``, SCAFFOLD's ``K``). `reply`
    runs the method's end of client training on the trained model, keeps the client's state in
    ``context.state`` for its next round, and replies with the model, the method's reply tensors
    and the metrics. The method reads the learning rate of the optimizer's parameter groups.

    A method whose client term is a loss on each sample (MOON's contrast over the model's
    features) or acts on the model during training needs fedsim's client core: `wrap` refuses it
    with the reason (`fedsim strategies`, column "your Flower app").

    Parameters
    ----------
    message : flwr.app.Message
        The train message `MethodStrategy` sent.
    context : flwr.app.Context
        The node's context: its ``state`` keeps the client's state between rounds, its node config's
        ``partition-id`` (where it has one) names the client.
    model : torch.nn.Module
        The model the loop trains, of the strategy's architecture.
    arrayrecord_key, configrecord_key : str
        The keys of the model's and the config's records (the strategy's).
    """

    def __init__(self, message: Message, context: Context, model: torch.nn.Module, *, arrayrecord_key: str = "arrays",
                 configrecord_key: str = "config"):
        config = message.content[configrecord_key]
        if METHOD_ENTRY not in config:
            raise ValueError(f"the train message has no {METHOD_ENTRY!r} in its config: ClientMethod serves a "
                             "fedsim.flower.MethodStrategy's rounds")
        self.message, self.context, self.model = message, context, model
        self.arrayrecord_key, self.settings = arrayrecord_key, config[METHOD_ENTRY]
        self.client = int(context.node_config.get(PARTITION_METRIC, 0))
        names = state_names(model)
        self.global_state = [tensor.detach().clone()
                             for tensor in from_record(message.content[arrayrecord_key], names, state_tensors(model))]
        self.algorithm = None  # built by `wrap`, which knows the optimizer's learning rate
        self.terms: LocalTerms | None = None
        self.steps = 0

    def wrap(self, optimizer: torch.optim.Optimizer) -> MethodOptimizer:
        """Return ``optimizer`` with the method's terms around its ``step``; build the method's client side."""
        rates = {group["lr"] for group in optimizer.param_groups}
        momenta = {group.get("momentum", 0.0) for group in optimizer.param_groups}
        if len(rates) != 1 or len(momenta) != 1:
            raise ValueError("the optimizer's parameter groups have different learning rates or momenta; the method's "
                             "client terms read one of each")
        config = from_settings_entry(self.settings, lr=float(rates.pop()))
        if (momentum := float(momenta.pop())) != config.momentum:
            raise SettingError("the optimizer's momentum is {got:text} but the strategy's is {momentum}: give "
                               "MethodStrategy(momentum={got:text}), which FedNova's server reads",
                               got=str(momentum), momentum=config.momentum)
        check_runs_on(config, "flower-app")
        algorithm = round_algorithm(config, self.model, self.global_state)
        begin_client(algorithm, self.client, self.broadcast_tensors(), self.context.state)
        terms = checked_terms(algorithm, algorithm.local_terms(self.client, self.global_state))
        if terms is not None and (type(terms).sample_loss is not LocalTerms.sample_loss
                                  or type(terms).training is not LocalTerms.training):  # undeclared: found in use
            raise ValueError(f"{type(algorithm).__name__}'s client term is a loss on each sample or acts on the model "
                             "during training, which needs fedsim's client core, not a ClientApp's optimizer step: "
                             "declare terms_need_client_core = True and run it with `fedsim flower simulate`")
        self.algorithm, self.terms = algorithm, terms
        return MethodOptimizer(optimizer, self)

    def broadcast_tensors(self) -> list[torch.Tensor]:
        """Return the server's broadcast state the message carries (none for most methods)."""
        if BROADCAST_RECORD not in self.message.content:
            return []
        return extra_tensors(self.message.content[BROADCAST_RECORD])

    def before_step(self) -> None:
        """Add the method's penalty gradient to the parameters' gradients (the wrapped ``step`` calls it)."""
        params = list(self.model.parameters())
        if self.terms is not None and (gradients := self.terms.penalty_gradient(params)) is not None:
            add_gradients(params, gradients)

    @torch.no_grad()
    def after_step(self) -> None:
        """Apply the method's correction after a step and count it (the wrapped ``step`` calls it)."""
        if self.terms is not None:
            self.terms.after_step(list(self.model.parameters()))
        self.steps += 1

    def reply(self, metrics: dict) -> Message:
        """Return the reply: the trained model and the method's reply tensors, and ``metrics`` with ``num-steps``.

        ``metrics`` must hold ``num-examples`` (the client's training samples, which ``size``
        weights read); ``num-steps`` and, where the node has one, ``partition-id`` are added.
        """
        if self.algorithm is None:
            raise RuntimeError("the training loop's optimizer was not wrapped: call method.wrap(optimizer) before "
                               "training, so that the method's terms run and its steps are counted")
        if "num-examples" not in metrics:
            raise ValueError("`metrics` lacks 'num-examples', the client's training samples, which the strategy weighs by")
        if self.steps == 0:
            raise ValueError("the client took no optimizer step: the method's end of training divides by its steps")
        reply = end_client(self.algorithm, self.client, self.global_state, state_tensors(self.model), self.steps,
                           self.context.state)
        trained = self.model.state_dict()  # all of it, integer buffers too, for the user's load_state_dict
        arrays = to_record(list(trained), list(trained.values()), reply)
        counts = {STEPS_METRIC: self.steps}
        if PARTITION_METRIC in self.context.node_config:
            counts[PARTITION_METRIC] = self.client
        return Message(RecordDict({self.arrayrecord_key: arrays, "metrics": MetricRecord({**metrics, **counts})}),
                       reply_to=self.message)


class MethodOptimizer:
    """An optimizer whose ``step`` runs a `ClientMethod`'s terms around it; everything else is the optimizer's."""

    def __init__(self, optimizer: torch.optim.Optimizer, method: ClientMethod):
        self.optimizer, self.method = optimizer, method

    def step(self, closure=None):
        """Add the method's penalty gradient, step, apply the method's correction."""
        if closure is not None:
            raise ValueError("a step with a closure (LBFGS) evaluates the loss several times: the method's terms "
                             "are for one gradient per step")
        self.method.before_step()
        self.optimizer.step()
        self.method.after_step()

    def __getattr__(self, name):
        return getattr(self.optimizer, name)
