"""fedsim's methods in a Flower user's own app: a strategy for the ``ServerApp``, a helper for the ``ClientApp``.

`MethodStrategy` is a Flower 1.42 strategy (a subclass of ``flwr.serverapp.strategy.FedAvg``,
driven by its ``start``) that runs any of fedsim's methods, built-in (``"scaffold"``,
``"fednova"``, ``"fedavg"`` with ``mu``, FedOpt's server optimizers) or the user's own
`fedsim.Algorithm`, on the server's side of fedsim's round (`fedsim.rounds.server_side.RoundServer`).
`ClientMethod` is the client's side, around the user's own training loop in an
``@app.train()`` function: the method's terms at each optimizer step, the client's state kept
in the node's ``Context.state`` between rounds, and the reply the strategy reads.

Imported on first use, so that ``import fedsim`` needs no Flower.
"""

import importlib

#: The public names and the modules that define them.
_PUBLIC = {"MethodStrategy": "fedsim.flower.strategy", "ClientMethod": "fedsim.flower.client"}

__all__ = list(_PUBLIC)


def __getattr__(name):
    if name in _PUBLIC:
        return getattr(importlib.import_module(_PUBLIC[name]), name)
    raise AttributeError(f"module 'fedsim.flower' has no attribute {name!r}")
