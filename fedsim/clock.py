"""The simulated clock: each client's compute speed and link, and the seconds its round takes.

A client's round takes, as FedScale's completion time does (Lai et al., ICML 2022), the model's
bytes down over its link, its local samples at ``sample_seconds`` each divided by its speed,
and its update's bytes up over its link. Speeds and bandwidths are drawn once per run, one per
client, from the run's seed (``client_speed``, ``bandwidth``: `Distribution`), so that every
engine and a resumed run see the same clients. Nothing here reads a wall clock: simulated
time is a function of the run's settings and its seed alone.

Examples
--------
>>> Distribution.parse("client_speed", "lognormal:0,0.5").kind
'lognormal'
>>> Distribution.parse("client_speed", "uniform:2,1")
Traceback (most recent call last):
partitions.SettingError: `client_speed`='uniform:2,1' must have 0 < A <= B in uniform:A,B
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .checks import SettingError

#: The distributions a per-client value is drawn from, and the parameters each takes.
DISTRIBUTIONS = {"constant": "constant:V", "lognormal": "lognormal:MU,SIGMA", "uniform": "uniform:A,B"}
#: The keys of `Stream.CLOCK` for each drawn quantity.
SPEED_KEY, BANDWIDTH_KEY = 0, 1


@dataclass(frozen=True)
class Distribution:
    """How a per-client quantity (a speed, a bandwidth) is drawn: a named distribution, or a file of values.

    Written as ``constant`` (1 for every client), ``constant:V``, ``lognormal:MU,SIGMA`` (the
    value's natural log is normal), ``uniform:A,B``, or the path of a file with one value per
    client in client order (text, separated by spaces, commas or lines; or a ``.npy`` array).

    Attributes
    ----------
    setting : str
        The setting that gave it, for its errors.
    kind : str
        A key of `DISTRIBUTIONS`, or ``"file"``.
    params : tuple of float
        The distribution's parameters.
    path : str, optional
        The file of a ``"file"`` distribution.
    """

    setting: str
    kind: str
    params: tuple[float, ...] = ()
    path: str | None = None

    @classmethod
    def parse(cls, setting: str, text) -> Distribution:
        """Return the distribution ``text`` writes, or refuse it naming ``setting`` and the forms it may take."""
        if not isinstance(text, str) or not text:
            raise SettingError("{setting} must be text: {forms:text}, or a file of one value per client",
                               fields={"setting": setting}, setting=text, forms=", ".join(DISTRIBUTIONS.values()))
        name, colon, rest = text.partition(":")
        if name not in DISTRIBUTIONS:
            if not Path(text).is_file():
                raise SettingError("{setting} is neither a distribution ({forms:text}) nor a file of one value per "
                                   "client", fields={"setting": setting}, setting=text,
                                   forms=", ".join(DISTRIBUTIONS.values()))
            return cls(setting, "file", path=text)
        params = _numbers(setting, text, rest) if colon else (1.0,) if name == "constant" else None
        arity = {"constant": 1, "lognormal": 2, "uniform": 2}[name]
        if params is None or len(params) != arity:
            raise SettingError("{setting} must be written {form:text}", fields={"setting": setting}, setting=text,
                               form=DISTRIBUTIONS[name])
        if (name == "constant" and params[0] <= 0) or (name == "lognormal" and params[1] < 0) or \
                (name == "uniform" and not 0 < params[0] <= params[1]):
            bound = {"constant": "V > 0", "lognormal": "SIGMA >= 0", "uniform": "0 < A <= B"}[name]
            raise SettingError("{setting} must have {bound:text} in {form:text}", fields={"setting": setting},
                               setting=text, bound=bound, form=DISTRIBUTIONS[name])
        return cls(setting, name, params)

    def draw(self, count: int, seed: int, key: int) -> np.ndarray:
        """Return ``count`` values, one per client: drawn from the stream (seed, `Stream.CLOCK`, ``key``), or read;
        refuse a draw that gives a value no clock can divide by (``lognormal`` with a very negative MU gives 0)."""
        values = self._values(count, seed, key)
        if not np.all(np.isfinite(values) & (values > 0)):
            raise SettingError("{setting} gives a client a speed or link of 0 or beyond a float's range; choose "
                               "parameters whose values are positive and finite", fields={"setting": self.setting},
                               setting=self.path or f"{self.kind}:{','.join(f'{p:g}' for p in self.params)}")
        return values

    def _values(self, count: int, seed: int, key: int) -> np.ndarray:
        """Return the ``count`` values `draw` checks."""
        if self.kind == "file":
            values = read_values(self.setting, self.path)
            if len(values) != count:
                raise SettingError("{setting} holds {found:text} values, one per client; the run has {count:text} "
                                   "clients", fields={"setting": self.setting}, setting=self.path,
                                   found=len(values), count=count)
            return values
        if self.kind == "constant":
            return np.full(count, self.params[0])
        from .seeding import Stream, derive_seed  # torch's: only where a value is drawn, not in the config's checks

        rng = np.random.default_rng(derive_seed(seed, Stream.CLOCK, key))
        if self.kind == "lognormal":
            return rng.lognormal(self.params[0], self.params[1], size=count)
        return rng.uniform(self.params[0], self.params[1], size=count)


def _numbers(setting: str, text: str, rest: str) -> tuple[float, ...] | None:
    """Return the comma-separated finite numbers of ``rest``, or ``None`` where one is not a number."""
    try:
        numbers = tuple(float(part) for part in rest.split(","))
    except ValueError:
        return None
    return numbers if all(math.isfinite(number) for number in numbers) else None


def read_values(setting: str, path: str) -> np.ndarray:
    """Return the positive finite numbers of the file ``path`` (``.npy``, or text); refuse others naming ``setting``."""
    try:
        if path.endswith(".npy"):
            values = np.load(path, allow_pickle=False).astype(float).ravel()
        else:
            values = np.array([float(part) for part in Path(path).read_text().replace(",", " ").split()])
    except (OSError, ValueError) as error:
        raise SettingError("{setting} could not be read as numbers: {error:text}", fields={"setting": setting},
                           setting=path, error=str(error)) from None
    if not len(values) or not np.all(np.isfinite(values) & (values > 0)):
        raise SettingError("{setting} must hold positive finite numbers, one per client", fields={"setting": setting},
                           setting=path)
    return values


def rules_the_run(config) -> bool:
    """Return whether simulated time tells something of ``config``'s run: its clients differ in speed or link, a
    deadline or over-selection decides a round's clients, or its rounds are asynchronous (figures add a time axis).

    Examples
    --------
    >>> from fedsim.config import RunConfig
    >>> rules_the_run(RunConfig()), rules_the_run(RunConfig(strategy="fedbuff"))
    (False, True)
    """
    from .config.strategies import get_strategy

    return get_strategy(config.strategy).local_training and (
        config.asynchronous is not None or config.round_deadline is not None or bool(config.over_select)
        or config.client_speed != "constant" or config.bandwidth is not None)


class ClientClock:
    """The seconds each client's round takes on the simulated clock.

    Parameters
    ----------
    config : fedsim.config.RunConfig
        Reads ``client_speed``, ``bandwidth`` (Mbit/s; ``None``: transfers take no time),
        ``sample_seconds`` and ``seed``.
    num_clients : int

    Examples
    --------
    >>> from fedsim.config import RunConfig
    >>> clock = ClientClock(RunConfig(client_speed="constant:2", bandwidth="constant:8", sample_seconds=0.01), 3)
    >>> clock.seconds(0, samples=100, bytes_down=10**6, bytes_up=10**6)  # 1 s down, 100 x 0.01 / 2, 1 s up
    2.5
    """

    def __init__(self, config, num_clients: int):
        self.speeds = Distribution.parse("client_speed", config.client_speed).draw(num_clients, config.seed,
                                                                                   SPEED_KEY)
        self.bytes_per_second = None if config.bandwidth is None else \
            Distribution.parse("bandwidth", config.bandwidth).draw(num_clients, config.seed, BANDWIDTH_KEY) * 1e6 / 8
        self.sample_seconds = config.sample_seconds

    def seconds(self, client: int, *, samples: int, bytes_down: int, bytes_up: int) -> float:
        """Return the seconds ``client`` takes to receive ``bytes_down``, train on ``samples`` and send ``bytes_up``."""
        work = samples * self.sample_seconds / float(self.speeds[client])
        if self.bytes_per_second is None:
            return work
        return (bytes_down + bytes_up) / float(self.bytes_per_second[client]) + work
