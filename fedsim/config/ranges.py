"""The valid range of every numeric setting of `fedsim.config.RunConfig`, as `fedsim.checks.check_number` takes it,
and the float32 bound of those that multiply the model's tensors."""

from ..checks import SettingError

#: Setting name -> the keywords of `fedsim.checks.check_number` (``low``, ``high``, ``low_open``, ``high_closed``).
#: An optional setting (default ``None``) is checked only when it is given.
NUMBER_RANGES = {
    "fraction": dict(low=0.0, high=1.0, low_open=True, high_closed=True),
    "lr": dict(low=0.0, low_open=True),
    "server_lr": dict(low=0.0, low_open=True),
    "momentum": dict(low=0.0, high=1.0),
    "server_momentum": dict(low=0.0, high=1.0),
    "server_beta1": dict(low=0.0, high=1.0),
    "server_beta2": dict(low=0.0, high=1.0),
    "server_tau": dict(low=0.0, low_open=True),
    "weight_decay": dict(low=0.0),
    "mu": dict(low=0.0),
    "moon_mu": dict(low=0.0, low_open=True),
    "moon_temperature": dict(low=0.0, low_open=True),
    "feature_noise": dict(low=0.0),
    "temperature": dict(low=0.0, low_open=True),
    "alpha": dict(low=0.0, low_open=True),
    "label_smoothing": dict(low=0.0, high=1.0),
    "client_state_memory": dict(low=0.0, low_open=True),
    "client_target": dict(low=0.0, high=1.0, high_closed=True),
    "local_test_fraction": dict(low=0.0, high=1.0, low_open=True),
    "holdout_clients": dict(low=0.0, high=1.0, low_open=True),
    "client_dropout": dict(low=0.0, high=1.0),
    "sample_seconds": dict(low=0.0, low_open=True),
    "round_deadline": dict(low=0.0, low_open=True),
    "over_select": dict(low=0.0),
    "async_alpha": dict(low=0.0, high=1.0, low_open=True, high_closed=True),
    "target_accuracy": dict(low=0.0, high=1.0, high_closed=True),
    "stragglers": dict(low=0.0, high=1.0, high_closed=True),
    "dp_clip": dict(low=0.0, low_open=True),
    "dp_noise": dict(low=0.0),
    "dp_target_epsilon": dict(low=0.0, low_open=True),
    "dp_delta": dict(low=0.0, high=1.0, low_open=True),
    "dp_adaptive_quantile": dict(low=0.0, high=1.0, low_open=True),
    "dp_clip_lr": dict(low=0.0, low_open=True),
    "dp_count_noise": dict(low=0.0, low_open=True),
}

#: The largest finite float32 number, (2 - 2**-23) * 2**127 (``numpy.finfo(numpy.float32).max``).
FLOAT32_MAX = (2 - 2**-23) * 2.0**127
#: The settings that multiply the model's tensors (a learning rate, a penalty's weight) -> the largest value a float32
#: run takes: beyond it the first step fails on a scalar that float32 cannot hold. FedOpt starts its second moment
#: at `server_tau` squared, so that one stays below the square root of FLOAT32_MAX (1.8e19).
FLOAT32_BOUNDS = {**dict.fromkeys(("lr", "server_lr", "weight_decay", "mu", "moon_mu", "moon_temperature",
                                   "feature_noise"), FLOAT32_MAX), "server_tau": 1e19}


def check_float32_scalars(config) -> None:
    """Refuse a setting of ``config`` (a float32 run) beyond its `FLOAT32_BOUNDS` entry, with its range.

    A larger number would fail at the run's first step, after its banner: ``--server-lr 1e40``
    cannot multiply a float32 tensor. One that fits may still make the model overflow, which the
    run reports as a divergence.

    Examples
    --------
    >>> from types import SimpleNamespace
    >>> check_float32_scalars(SimpleNamespace(**{**dict.fromkeys(FLOAT32_BOUNDS, 1.0), "server_lr": 1e40}))
    Traceback (most recent call last):
    partitions.SettingError: `server_lr` must be in (0.0, 3.4028234663852886e+38] with `dtype`='float32', got 1e+40: beyond that, float32 cannot hold a number the run multiplies the model's tensors by
    """
    for name, bound in FLOAT32_BOUNDS.items():
        value = getattr(config, name)
        if value is not None and value > bound:
            limits = NUMBER_RANGES[name]
            interval = f"{'(' if limits.get('low_open') else '['}{limits['low']}, {bound}]"
            raise SettingError("{setting:name} must be in {interval:text} with {dtype}, got {setting:text}: beyond "
                               "that, float32 cannot hold a number the run multiplies the model's tensors by",
                               fields={"setting": name}, setting=value, interval=interval, dtype="float32")
