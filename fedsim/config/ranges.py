"""The valid range of every numeric setting of `fedsim.config.RunConfig`, as `fedsim.checks.check_number` takes it."""

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
    "stragglers": dict(low=0.0, high=1.0, high_closed=True),
}
