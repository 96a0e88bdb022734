"""The public algorithm API: `Algorithm`, the round every engine runs, and the hooks a method overrides.

FedAvg's round (`fedsim.rounds.fedavg.FedAvgRounds`) samples clients, trains each from the
global model, combines the trained models with their weights and hands the mean delta to the
server step. A method changes some of these places, each a hook of `Algorithm`:

==================  ======  ======================================================  ==========================
hook                side    when it runs                                            built-in use
==================  ======  ======================================================  ==========================
`local_terms`       client  before a client trains: its extra loss, penalty,        SCAFFOLD, MOON
                            per-step correction (`LocalTerms`)
`after_client`      client  after a client trained, with its trained tensors        SCAFFOLD's ``c_k``, MOON
`scale`             server  the weight of a trained model in the round's sum        FedNova's ``p_k / a_k``
`aggregate`         server  the combination of the round's models (weighted mean)   a median (user code)
`to_delta`          server  the combination turned into the server's delta          FedNova's ``tau_eff``
`begin_round`       both    before a round (and on a Flower node, before a client)  (sums are zeroed for it)
`end_round`         server  after the server step                                   SCAFFOLD's ``c``
`personal_model`    client  the model a client evaluates as its own                 FedBN (user code)
==================  ======  ======================================================  ==========================

A method's tensors are declared by the type of the attribute that holds them
(`fedsim.algorithms.declared`): a `ServerState` (the server's, checkpointed; with
``broadcast=True`` sent to every client each round), a `RoundSum` (a sum over the round's
clients, zeroed as a round begins and added up over processes and Flower replies) and
`ClientStates` (what a client keeps between its rounds, with ``stateful_clients = True``). Every
engine carries them; a method writes no transport or checkpoint code, and one that keeps
tensors in an undeclared attribute is refused when it is built.

Capabilities are declared by the class, and every engine and acceleration reads them rather
than a list of names:

- ``stateful_clients``: clients keep a state (refused by ``--workers`` and ``fedsim ddp``, whose
  processes would each hold a different client's state);
- ``linear``: the combination is the weighted sum of the trained models, which the engines
  keep as a running sum, so that `fedsim run --workers` and the one-step fusion may split it.
  A class that overrides `aggregate` is not linear: the round keeps every trained model.
- ``needs_client_loop``: clients train one by one with the hooks (true when `local_terms` or
  `after_client` is overridden), so the one-step fusion, which trains clients together with
  plain SGD, does not apply.
- ``vectorizable``: clients may train as a cohort, stacked (`fedsim.engines.inprocess.vectorized`):
  true without client terms; a class that overrides `local_terms` declares it, and its terms
  give their stacked form (`LocalTerms.stacked`), as FedProx's and SCAFFOLD's do.

A method's own settings are declared in ``options`` (name -> `Option`), set with
``--algorithm-option name=value`` or an ``[algorithm_options]`` table, checked against their
ranges and read with ``self.option(name)``.

Where clients run in other processes (Flower's nodes) the same class serves both sides: a
node receives the broadcast state with the model and its client's state, runs `local_terms`
and `after_client` itself, and replies with its round sums, which the server adds.
"""

from __future__ import annotations

import contextlib
import inspect
import math
from dataclasses import dataclass

import torch

from ..checks import check_integer, check_number


@dataclass(frozen=True)
class Option:
    """A setting an algorithm declares: its default and valid range.

    Parameters
    ----------
    default : int or float
        The value when unset; its type is the option's (an int option takes whole numbers).
    low, high : float
        The valid interval (``low`` included unless ``low_open``, ``high`` excluded unless
        ``high_closed``).
    help : str
        What it is, for ``--help`` and error messages.
    setting : str, optional
        The run's setting (a `fedsim.config.RunConfig` field) that gives the value, where a flag of
        its own sets it (FedProx's ``mu`` is ``--mu``, MOON's ``mu`` is ``--moon-mu``); ``None``: the
        option is set with ``algorithm_options``.
    """

    default: int | float
    low: float = -math.inf
    high: float = math.inf
    low_open: bool = False
    high_closed: bool = False
    help: str = ""
    setting: str | None = None

    def check(self, name: str, value):
        """Return ``value`` checked against the type and range, the error naming option ``name``."""
        label = f"algorithm option {name}"
        if isinstance(self.default, int) and not isinstance(self.default, bool):
            lowest = (math.floor(self.low) + 1 if self.low_open else math.ceil(self.low)) if math.isfinite(self.low) \
                else -(2**63)
            value = check_integer(label, value, minimum=lowest)
            if value > self.high or (value == self.high and not self.high_closed):
                raise ValueError(f"`{label}` must be below {self.high}, got {value}")
            return value
        return check_number(label, value, low=self.low, high=self.high, low_open=self.low_open,
                            high_closed=self.high_closed)


def check_aggregate_signature(cls) -> None:
    """Refuse a class whose `Algorithm.aggregate` does not take the round's ``clients`` after ``global_state``."""
    try:
        inspect.signature(cls.aggregate).bind(None, [], [], [], [])
    except TypeError:
        raise TypeError(f"{cls.__name__}.aggregate must take (models, weights, global_state, clients): `clients` "
                        "holds each model's (client, shard size), in the order of the models") from None


class LocalTerms:
    """What an algorithm changes in one client's local training; every method is optional (client side).

    `Algorithm.local_terms` returns one for each client, for that client's training only. The
    client core (`fedsim.client.client_update`) calls, at each step of B samples:

    1. `sample_loss` for each micro-batch: added to each sample's loss, inside the batch mean;
    2. `penalty_gradient` once, after the micro-batches' backward: the gradient of `penalty`, a
       scalar added to the step's loss (FedProx's ``mu/2 |w - w_t|^2``, FedDyn's linear and
       quadratic terms), added to the parameters' gradients;
    3. the optimizer step, then `after_step` (SCAFFOLD's ``w -= lr (c - c_k)``).
    """

    def training(self, model: torch.nn.Module):
        """Return a context manager around the client's whole training of ``model`` (MOON captures features)."""
        return contextlib.nullcontext()

    def sample_loss(self, inputs: torch.Tensor, outputs: torch.Tensor) -> torch.Tensor | None:
        """Return an extra loss per sample of the batch (shape ``(batch,)``), or ``None`` for none."""
        return None

    def penalty(self, params: list[torch.Tensor]) -> torch.Tensor | None:
        """Return a scalar added to the step's loss, a function of the parameters, or ``None`` for none."""
        return None

    def penalty_gradient(self, params: list[torch.Tensor]) -> list[torch.Tensor | None] | None:
        """Return the gradient of `penalty` with respect to each of ``params``, or ``None`` where there is no penalty.

        The client core adds it to the loss's gradients after the backward pass and before the
        optimizer step; the penalty's value is not part of the reported loss. The default
        differentiates `penalty` by autograd. A term whose gradient has a closed form overrides
        this to compute it directly, at the cost of a pass over the parameters instead of a
        backward through the penalty (FedProx: ``mu (w - w_t)``). A stacked form
        (`stacked`) receives and returns the stacked rows.

        Parameters
        ----------
        params : list of Tensor
            The parameters (``model.parameters()`` order) at this step, as `penalty` takes them.

        Returns
        -------
        list of Tensor or None
            One gradient per parameter, of its shape (``None`` for a parameter the penalty does
            not involve).
        """
        if type(self).penalty is LocalTerms.penalty:  # no penalty: nothing to differentiate
            return None
        with torch.enable_grad():
            leaves = [param.detach().requires_grad_() for param in params]
            penalty = self.penalty(leaves)
            if penalty is None:
                return None
            return list(torch.autograd.grad(penalty, leaves, allow_unused=True))

    def after_step(self, params: list[torch.Tensor]) -> None:
        """Change the parameters in place after each optimizer step (runs under ``torch.no_grad``)."""

    @classmethod
    def stacked(cls, terms: list[LocalTerms]) -> LocalTerms | None:
        """Return one `LocalTerms` that acts for all of ``terms``' clients at once, or ``None`` where it cannot.

        A round's clients may train as a cohort (`fedsim.engines.inprocess.vectorized`): each
        parameter stacked along a first dimension, one row per client in the order of ``terms``
        (``None`` for a client without terms, where `Algorithm.local_terms` gave none).
        The stacked form's `penalty` and `after_step` receive those stacks, cut to the clients still
        training (the first rows, as many as ``params[0].shape[0]``): `penalty` returns the sum of
        the clients' penalties, and `after_step` changes each client's row as its own terms would.
        Its `training` context runs around the cohort's whole training, and a loss per sample comes
        from `step_inputs` and `client_sample_loss` (MOON's contrast); `sample_loss` is not used.
        ``None`` (the default) trains such clients in turn.
        """
        return None

    def step_inputs(self, inputs: torch.Tensor) -> list[torch.Tensor]:
        """A stacked form's tensors for each step, from the active clients' batches (clients x batch x ...),
        computed outside the vmapped forward and handed to `client_sample_loss` one client's slice at a time."""
        return []

    def client_sample_loss(self, inputs: torch.Tensor, outputs: torch.Tensor,
                           extras: list[torch.Tensor]) -> torch.Tensor | None:
        """A stacked form's extra loss per sample of one client's batch (shape ``(batch,)``), inside the vmapped
        forward, with that client's slices of `step_inputs`; ``None`` for none."""
        return None


_CLIENT_HOOKS = ("local_terms", "after_client")


class Algorithm:
    """FedAvg's round, and the base of every method: override the hooks a method changes (module text).

    Parameters
    ----------
    config : fedsim.config.RunConfig
        The run's settings; `option` reads the method's own (`Option`).
    model : torch.nn.Module
        The model clients train.
    global_state : list of Tensor
        The global parameters then floating-point buffers (`fedsim.client.state_tensors` order).

    Attributes
    ----------
    name : str
        What runs record and tables show; a subclass's class name lowercased when it sets none.
    options : dict of str to Option
        The method's own settings, their defaults and ranges (class attribute).
    """

    name: str = "fedavg"
    options: dict[str, Option] = {}
    #: Clients keep a state between the rounds they take part in (a `ClientStates` attribute).
    stateful_clients: bool = False
    #: The combination is the weighted sum of the trained models (`aggregate` not overridden).
    linear: bool = True
    #: Clients must train one by one with the hooks (`local_terms` or `after_client` overridden).
    needs_client_loop: bool = False
    #: Clients may train as a cohort (`fedsim.engines.inprocess.vectorized`): the method's client terms have a
    #: stacked form (`LocalTerms.stacked`). True without client terms; a class that overrides
    #: `local_terms` declares it.
    vectorizable: bool = True
    #: Bytes a client receives and sends besides the model, per round (SCAFFOLD's control variates).
    extra_bytes: int = 0
    #: The client terms add a loss on each sample or act on the model during training (MOON's contrast of its
    #: features): they run in fedsim's client core, not around a user's optimizer (`fedsim.flower.ClientMethod`).
    terms_need_client_core: bool = False

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if "name" not in cls.__dict__:
            cls.name = cls.__name__.lower()
        overrides_aggregate = cls.aggregate is not Algorithm.aggregate
        if overrides_aggregate:
            check_aggregate_signature(cls)
        if "linear" not in cls.__dict__:
            cls.linear = not overrides_aggregate
        elif cls.linear and overrides_aggregate:
            raise TypeError(f"{cls.__name__} overrides `aggregate` but declares `linear` = True: the engines would "
                            "keep a running weighted sum and never call it; remove the declaration")
        if "vectorizable" not in cls.__dict__ and "local_terms" in cls.__dict__:
            cls.vectorizable = False
        if "needs_client_loop" not in cls.__dict__:
            cls.needs_client_loop = any(getattr(cls, hook) is not getattr(Algorithm, hook) for hook in _CLIENT_HOOKS)

    def __init__(self, config, model: torch.nn.Module, global_state: list[torch.Tensor]):
        self.num_params = sum(1 for _ in model.parameters())
        self._option_values = {name: option.default for name, option in self.options.items()}
        self._option_values.update(getattr(config, "algorithm_options", None) or {})
        self._option_values.update({name: getattr(config, option.setting) for name, option in self.options.items()
                                    if option.setting is not None})

    def option(self, name: str):
        """Return the value of the method's option ``name`` (declared in ``options``): the run's, or its default."""
        return self._option_values[name]

    # ---- client side ---------------------------------------------------------------------------------------------
    def local_terms(self, client: int, global_state: list[torch.Tensor]) -> LocalTerms | None:
        """Return what changes in ``client``'s local training from ``global_state`` (`LocalTerms`); ``None``: nothing."""
        return None

    def after_client(self, client: int, global_state: list[torch.Tensor], trained: list[torch.Tensor],
                     num_steps: int) -> None:
        """Take note of ``client``'s ``trained`` tensors after ``num_steps`` local steps (its state, the round's sums).

        ``trained`` is read in place from the model every client trains in turn: copy what is kept.
        Runs under ``torch.no_grad``, as `to_delta` does.
        """

    # ---- server side ---------------------------------------------------------------------------------------------
    def begin_round(self) -> None:
        """Start a round (server; on a Flower node, before each client), once its round sums are zero."""

    def scale(self, weight: float, num_steps: int) -> float:
        """Return the weight of a trained model in the round's combination, given its rule's weight and local steps."""
        return weight

    def aggregate(self, models: list[list[torch.Tensor]], weights: list[float], global_state: list[torch.Tensor],
                  clients: list[tuple[int, int]]) -> list[torch.Tensor]:
        """Return the combination of the round's trained ``models`` (the weights sum to 1): their weighted sum.

        Override it for a combination that is not linear (a median, a trimmed mean, a rule that
        weighs clients by their record); the round then keeps every trained model until it ends.
        ``clients`` holds each model's client and that client's shard size, in the order of
        ``models`` (partition order). The combination holds one tensor per tensor of
        ``global_state``, of its shape, dtype and device: the round checks it, and ends a run
        whose method returns another with an error naming this hook.
        """
        combined = [torch.zeros_like(tensor) for tensor in global_state]
        for model, weight in zip(models, weights):
            torch._foreach_add_(combined, model, alpha=weight)
        return combined

    @torch.no_grad()
    def to_delta(self, combined: list[torch.Tensor], global_state: list[torch.Tensor]) -> None:
        """Turn the round's combination into the server's delta, in place: minus the global model by default."""
        torch._foreach_sub_(combined, global_state)

    def end_round(self) -> None:
        """Finish the round once the server has stepped (SCAFFOLD moves its ``c`` here)."""

    # ---- evaluation ----------------------------------------------------------------------------------------------
    def personal_model(self, client: int, global_state: list[torch.Tensor]) -> list[torch.Tensor] | None:
        """Return the model ``client`` holds as its own, ``None`` for the global model (the default, and a client
        with no personal part yet).

        A method with personal parts (FedBN's BatchNorm) overrides it: with local test sets
        (``local_test_fraction``), each client's own model is evaluated on its local test set
        beside the global model (``personal_`` columns), and ``personalize_steps`` fine-tunes it.
        """
        return None

    @classmethod
    def has_personal_models(cls) -> bool:
        """Whether the method gives its clients models of their own (it overrides `personal_model`)."""
        return cls.personal_model is not Algorithm.personal_model
