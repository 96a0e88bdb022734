"""Settings that mean something only together: each combination a `fedsim.config.RunConfig` refuses, and why."""

from __future__ import annotations


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
        name = unread[0]
        raise ValueError(f"`{name}`={getattr(config, name)!r} does nothing with `server_optimizer`="
                         f"{config.server_optimizer!r}; remove it or choose a server optimizer that reads it")


def check_gradient_settings(config) -> None:
    """Refuse the gradient strategies' settings that contradict each other (PowerSGD's rank, SyncBatchNorm)."""
    if config.powersgd_rank != 2 and config.compression != "powersgd":
        raise ValueError(f"`powersgd_rank`={config.powersgd_rank} does nothing without `compression`='powersgd'")
    if config.sync_bn and config.weights == "dynamic":
        if config.dynamic_rule == "cosine":
            raise ValueError("`sync_bn`=True ties each rank's gradient to every rank's batch, so "
                             "`dynamic_rule`='cosine' has no per-rank gradient to score; use `dynamic_rule`='loss'")
        if config.micro_batches > 1:
            raise ValueError(f"`sync_bn`=True with `weights`='dynamic' weighs each rank's loss before its "
                             f"backward, which needs the whole batch's loss first: `micro_batches` must be 1, "
                             f"got {config.micro_batches}")


def check_vectorize(config, defaults: dict) -> None:
    """Refuse a ``vectorize`` that is not true, false or unset, and a cohort size with the loop chosen."""
    if not (config.vectorize is None or isinstance(config.vectorize, bool)):
        raise TypeError(f"`vectorize` must be true, false or unset (where it applies), got {config.vectorize!r}")
    if config.vectorize is False and config.vectorize_chunk != defaults["vectorize_chunk"]:
        raise ValueError(f"`vectorize_chunk`={config.vectorize_chunk} does nothing with `vectorize`=False (the loop "
                         "trains one client at a time); remove one of them")
