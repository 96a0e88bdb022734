"""The settings of evaluation on the clients' local test sets, checked together."""

from __future__ import annotations

from ..checks import SettingError

#: The settings that act on the clients' local test sets, and so need ``local_test_fraction``.
ON_LOCAL_TEST_SETS = ("eval_clients_every", "personalize_steps", "holdout_clients", "client_target")


def check_client_evaluation(config, defaults: dict, local_training: bool) -> None:
    """Refuse a setting of the clients' evaluation without the local test sets it needs, and a held-out
    client where every client trains at every step.

    Parameters
    ----------
    config : fedsim.config.RunConfig
    defaults : dict
        Every field's default.
    local_training : bool
        Whether the strategy trains sampled clients for a round (FedAvg's round), which a held-out
        client can sit out; allreduce and reweighted train every rank at every step.
    """
    given = {name: getattr(config, name) != defaults[name] for name in ON_LOCAL_TEST_SETS}
    if config.local_test_fraction is None and any(given.values()):
        name = next(name for name, is_set in given.items() if is_set)
        raise SettingError("{setting:name} applies to the clients' local test sets; set {local_test_fraction:name} to "
                           "make them", fields={"setting": name}, setting=getattr(config, name),
                           local_test_fraction=config.local_test_fraction)
    if config.holdout_clients is not None and not local_training:
        raise SettingError("{holdout_clients:name} keeps clients out of training, but {strategy} trains every rank at "
                           "every step; use it with FedAvg's round (fedavg, scaffold, ...)",
                           holdout_clients=config.holdout_clients, strategy=config.strategy)
