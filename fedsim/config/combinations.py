"""Settings that mean something only together: each combination a `fedsim.config.RunConfig` refuses, and why."""

from __future__ import annotations

from ..checks import SettingError, SettingTypeError

def check_server_optimizer(config, defaults: dict) -> None:
    """Refuse a server-optimizer setting that the chosen ``server_optimizer`` does not read."""
    changed = {name for name in ("server_momentum", "server_beta1", "server_beta2", "server_tau")
               if getattr(config, name) != defaults[name]}
    if config.server_optimizer == "sgd":
        unread = sorted(changed - {"server_momentum"})
    else:
        unread = sorted(changed & ({"server_momentum", "server_beta2"} if config.server_optimizer == "adagrad"
                                   else {"server_momentum"}))
    if unread:
        raise SettingError("{setting} does nothing with {server_optimizer}; remove it or choose a server optimizer "
                           "that reads it", fields={"setting": unread[0]}, setting=getattr(config, unread[0]),
                           server_optimizer=config.server_optimizer)


def check_gradient_settings(config) -> None:
    """Refuse the gradient strategies' settings that contradict each other (PowerSGD's rank, SyncBatchNorm)."""
    if config.powersgd_rank != 2 and config.compression != "powersgd":
        raise SettingError("{powersgd_rank} does nothing without {compression}", powersgd_rank=config.powersgd_rank,
                           compression="powersgd")
    if config.sync_bn and config.weights == "dynamic":
        if config.dynamic_rule == "cosine":
            raise SettingError("{sync_bn} ties each rank's gradient to every rank's batch, so {dynamic_rule} has no "
                               "per-rank gradient to score; use {loss}", fields={"loss": "dynamic_rule"},
                               sync_bn=True, dynamic_rule="cosine", loss="loss")
        if config.micro_batches > 1:
            raise SettingError("{sync_bn} with {weights} weighs each rank's loss before its backward, which needs the "
                               "whole batch's loss first: {micro_batches:name} must be 1, got {micro_batches:text}",
                               sync_bn=True, weights="dynamic", micro_batches=config.micro_batches)


def check_vectorize(config, defaults: dict) -> None:
    """Refuse a ``vectorize`` that is not true, false or unset, and a cohort size with the loop chosen."""
    if not (config.vectorize is None or isinstance(config.vectorize, bool)):
        raise SettingTypeError("{vectorize:name} must be true, false or unset (where it applies), got {got:text}",
                               vectorize=config.vectorize, got=repr(config.vectorize))
    if config.vectorize is False and config.vectorize_chunk != defaults["vectorize_chunk"]:
        raise SettingError("{vectorize_chunk} does nothing with {vectorize} (the loop trains one client at a time); "
                           "remove one of them", vectorize_chunk=config.vectorize_chunk, vectorize=False)
