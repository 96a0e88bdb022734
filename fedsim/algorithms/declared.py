"""What a method declares as its state, and how every engine carries it: the method writes no transport code.

A method keeps three kinds of tensors, each declared by the type of the attribute that holds it:

==================  ==============================================  ======================================
declared as         what it is                                      what the engines do with it
==================  ==============================================  ======================================
`ServerState`       the server's own tensors (FedDyn's ``h``);      checkpointed; with ``broadcast=True``
                    with ``broadcast=True`` sent to every client    sent with the global model every round
                    (SCAFFOLD's ``c``)                              (Flower's records)
`RoundSum`          a sum over the round's clients, added to in     zeroed as a round begins; added up
                    `after_client` or `scale` (SCAFFOLD's           over processes (``--workers``, DDP's
                    ``sum dc_k``, FedNova's totals)                 all-reduce) and from each Flower
                                                                    client's reply (where the method has
                                                                    an `after_client`)
`ClientStates`      what each client keeps between its rounds       checkpointed, spilled to disk past
                    (``stateful_clients = True``)                   ``client_state_memory``, kept in each
                                                                    Flower node's ``Context.state``
==================  ==============================================  ======================================

A method that keeps tensors in any other attribute is refused when it is built
(`check_declared`): an engine that runs its clients elsewhere would not carry them, and the
run would be silently wrong. The functions below are the engines' side; a method calls none of them.
"""

from __future__ import annotations

import torch

from .base import Algorithm
from .client_state import ClientStates


class ServerState(list):
    """A method's tensors on the server, zeros shaped as ``like``: checkpointed, and sent to every client each
    round with ``broadcast=True`` (a client reads them in `Algorithm.local_terms` and `Algorithm.after_client`)."""

    def __init__(self, like, *, broadcast: bool = False):
        super().__init__(torch.zeros_like(tensor) for tensor in like)
        self.broadcast = broadcast


class RoundSum(list):
    """A sum over a round's clients, zeros shaped as ``like``: zeroed as each round begins, added to by the
    method's hooks, and added up over every process and client before the server's hooks read it."""

    def __init__(self, like):
        super().__init__(torch.zeros_like(tensor) for tensor in like)


def declared(algorithm, kind: type) -> dict:
    """Return ``algorithm``'s attributes of type ``kind``, by name, in the order the method set them."""
    return {name: value for name, value in vars(algorithm).items() if isinstance(value, kind)}


def check_declared(algorithm, global_state: list[torch.Tensor] = ()) -> None:
    """Refuse a method that keeps tensors in an attribute no engine would carry (not `ServerState`, `RoundSum`
    or `ClientStates`), naming it.

    The round's ``global_state`` itself (or some of its tensors), which a method may hold to read
    or change in place, is every engine's to carry.
    """
    engines = {id(tensor) for tensor in global_state}
    if len(declared(algorithm, ClientStates)) > 1:
        raise TypeError(f"{type(algorithm).__name__} declares {len(declared(algorithm, ClientStates))} ClientStates; "
                        "keep all that a client keeps in one (a list of tensors per client)")
    for name, value in vars(algorithm).items():
        if isinstance(value, (ServerState, RoundSum, ClientStates)) or name.startswith("_"):
            continue
        items = [value] if isinstance(value, torch.Tensor) else list(value) if isinstance(value, (list, tuple)) else []
        tensors = bool(items) and all(isinstance(item, torch.Tensor) for item in items)
        if tensors and not all(id(item) in engines for item in items):
            raise TypeError(f"{type(algorithm).__name__}.{name} holds tensors that an engine running clients in "
                            "other processes would not carry; declare it: a RoundSum (a sum over the round's "
                            "clients), a ServerState (the server's, checkpointed; broadcast=True to send it to "
                            "every client) or ClientStates (what each client keeps)")


def round_sums(algorithm) -> list[torch.Tensor]:
    """Return the tensors of every `RoundSum`, in declaration order (what processes add up)."""
    return [tensor for tensors in declared(algorithm, RoundSum).values() for tensor in tensors]


def begin_round(algorithm) -> None:
    """Start a round's sums (on the server; on a Flower node, before each client): zero them, then the method's hook."""
    sums = round_sums(algorithm)
    if sums:
        torch._foreach_zero_(sums)
    algorithm.begin_round()


def broadcast(algorithm) -> list[torch.Tensor]:
    """Return what the server sends every client with the global model: the broadcast `ServerState`'s tensors."""
    return [tensor for state in declared(algorithm, ServerState).values() if state.broadcast for tensor in state]


def receive_broadcast(algorithm, tensors: list[torch.Tensor]) -> None:
    """On a client: take in the server's `broadcast`."""
    targets = broadcast(algorithm)
    if targets:
        with torch.no_grad():
            torch._foreach_copy_(targets, list(tensors))


def reply(algorithm) -> list[torch.Tensor]:
    """On a client, after its `after_client`: its share of the round's sums, sent with its model.

    A method whose clients run no `after_client` adds to its sums on the server only (FedNova's
    totals, in `scale`): its clients reply with the model alone, as Flower's own strategies and
    wrappers expect.
    """
    return round_sums(algorithm) if type(algorithm).after_client is not Algorithm.after_client else []


def add_reply(algorithm, tensors: list[torch.Tensor]) -> None:
    """On the server: add a client's `reply` to the round's sums."""
    sums = reply(algorithm)
    if len(tensors) != len(sums):
        raise ValueError(f"a client replied {len(tensors)} tensors, but {type(algorithm).__name__} declares "
                         f"{len(sums)} in its round sums: the client runs another version of the method")
    if sums:
        with torch.no_grad():
            torch._foreach_add_(sums, [tensor.to(total.device, total.dtype) for tensor, total in zip(tensors, sums)])


def client_store(algorithm) -> ClientStates | None:
    """Return the method's `ClientStates` (at most one, `check_declared`), ``None`` if its clients keep nothing."""
    return next(iter(declared(algorithm, ClientStates).values()), None)


def client_state(algorithm, client: int) -> list[torch.Tensor] | None:
    """Return the state ``client`` keeps between rounds, ``None`` if it has none."""
    store = client_store(algorithm)
    return None if store is None else store.get(client)


def set_client_state(algorithm, client: int, tensors: list[torch.Tensor] | None) -> None:
    """On a client: restore the state it kept (``None``: it has none yet)."""
    if (store := client_store(algorithm)) is not None:
        store.set(client, tensors)


def state_dict(algorithm, *, with_client_states: bool = True) -> dict:
    """Return what a checkpoint needs to continue ``algorithm``: its `ServerState`, by name, and its clients' states.

    ``with_client_states`` is False on a server whose clients keep their states themselves
    (Flower's nodes): its checkpoint marks them missing, and resuming it is refused.
    """
    state = {name: [tensor.clone() for tensor in tensors] for name, tensors in declared(algorithm, ServerState).items()}
    if (store := client_store(algorithm)) is not None:
        state["client_states"] = store.state_dict() if with_client_states else None
    return state


def load_state_dict(algorithm, state: dict) -> None:
    """Restore `state_dict` output."""
    for name, tensors in declared(algorithm, ServerState).items():
        with torch.no_grad():
            torch._foreach_copy_(tensors, state[name])
    if (store := client_store(algorithm)) is None:
        return
    if state["client_states"] is None:
        raise ValueError("this checkpoint was written by a server whose clients kept their states on their "
                         "own nodes (a Flower run), so it cannot continue them; start a new run")
    store.load_state_dict(state["client_states"])


def spill_client_states(algorithm, folder, budget_bytes: int) -> None:
    """Keep at most ``budget_bytes`` of the clients' states in memory and spill the rest to files in ``folder``.

    The in-process engine calls it (``--client-state-memory``) for every `ClientStates` the
    method declares, sharing the budget.
    """
    stores = declared(algorithm, ClientStates)
    for name, store in stores.items():
        store.spill_to(folder, name, budget_bytes // len(stores))
