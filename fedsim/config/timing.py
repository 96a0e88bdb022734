"""The settings of the simulated clock and of asynchronous rounds: what a `fedsim.config.RunConfig` refuses of them
before any work (`fedsim.clock` is the clock, `fedsim.rounds.asynchronous` the asynchronous server).

An asynchronous server has no rounds, so the settings that shape a round (its deadline, its
over-selection, the clients that fail to return or straggle in it, Poisson sampling and the
accountant of client-level DP that assumes it) are refused with it; the methods whose server
hooks assume a round's clients are refused where the method is known (`fedsim.support`).
"""

from __future__ import annotations

from pathlib import Path

from ..checks import SettingError, check_choice, check_integer
from ..clock import DISTRIBUTIONS, Distribution
from ..staleness import Staleness

#: The asynchronous servers (``asynchronous``).
ASYNCHRONOUS = ("fedbuff", "fedasync")
#: The settings that mean something only with ``asynchronous``, and those of one server only.
ASYNC_SETTINGS = ("buffer", "concurrency", "staleness", "async_alpha")
ONLY_FOR = {"buffer": "fedbuff", "async_alpha": "fedasync"}
#: The settings of a synchronous round, and why an asynchronous run has no use for each.
ROUND_SETTINGS = {
    "round_deadline": "a client is never waited for",
    "over_select": "a client is never waited for",
    "client_dropout": "a client that never returns would hold its place for ever",
    "stragglers": "slow clients are the clock's speeds",
    "dp_clip": "client-level DP's accountant counts rounds of sampled clients",
}
#: The settings of `ROUND_SETTINGS` that a comparison gives its synchronous strategies alone: how a round waits.
SYNCHRONOUS_SETTINGS = ("round_deadline", "over_select")
#: The server step settings fedasync's mixing replaces.
SERVER_SETTINGS = ("server_lr", "server_momentum", "server_optimizer")


def reads_asynchronous_setting(name: str, asynchronous: str | None) -> bool:
    """Return whether a run whose server is ``asynchronous`` (``None``: synchronous rounds) reads setting ``name``:
    `ASYNC_SETTINGS` are the asynchronous servers' (`ONLY_FOR` says which one), a round's deadline and
    over-selection the synchronous rounds'; every other setting is read by both, or refused with one of them.

    Examples
    --------
    >>> [reads_asynchronous_setting(name, "fedasync") for name in ("buffer", "concurrency", "fraction")]
    [False, True, True]
    >>> reads_asynchronous_setting("round_deadline", "fedbuff"), reads_asynchronous_setting("round_deadline", None)
    (False, True)
    """
    if name in SYNCHRONOUS_SETTINGS:
        return asynchronous is None
    if name not in ASYNC_SETTINGS:
        return True
    return asynchronous is not None and ONLY_FOR.get(name, asynchronous) == asynchronous


def resolve_distribution_files(config) -> None:
    """Make a ``client_speed`` or ``bandwidth`` that names a file an absolute path, as every process reads it."""
    for name in ("client_speed", "bandwidth"):
        value = getattr(config, name)
        if isinstance(value, str) and value.partition(":")[0] not in DISTRIBUTIONS and Path(value).expanduser().is_file():
            object.__setattr__(config, name, str(Path(value).expanduser().resolve()))


def check_timing(config, defaults: dict) -> None:
    """Refuse clock and asynchronous settings that are malformed or contradict each other, one error naming them.

    ``config`` is a `RunConfig` whose strategy reads these settings (a gradient strategy's were
    refused before); ``defaults`` holds every field's default, against which a setting counts as given.
    """
    Distribution.parse("client_speed", config.client_speed)
    if config.bandwidth is not None:
        Distribution.parse("bandwidth", config.bandwidth)
    Staleness.parse(config.staleness)
    object.__setattr__(config, "buffer", check_integer("buffer", config.buffer))
    if config.concurrency is not None:
        object.__setattr__(config, "concurrency", check_integer("concurrency", config.concurrency))
    if config.over_select and config.dp_clip is not None:
        raise SettingError("{over_select} keeps the fastest of more clients than a round's, so a fast client takes "
                           "part more often than the sampling {dp_clip:name}'s accountant is told; use one of the two",
                           over_select=config.over_select, dp_clip=config.dp_clip)
    if config.over_select and config.client_sampling == "poisson":
        raise SettingError("{over_select} samples a fixed number of clients beyond a round's; with {client_sampling} "
                           "a round's size is drawn: use one of the two", over_select=config.over_select,
                           client_sampling="poisson")
    if config.asynchronous is None:
        for name in ASYNC_SETTINGS:
            if getattr(config, name) != defaults[name]:
                raise SettingError("{setting} does nothing without {asynchronous:name} (the rounds are synchronous); "
                                   "remove it or set {asynchronous:name}", fields={"setting": name},
                                   setting=getattr(config, name))
        return
    check_choice("asynchronous", config.asynchronous, ASYNCHRONOUS)
    for name, server in ONLY_FOR.items():
        if config.asynchronous != server and getattr(config, name) != defaults[name]:
            raise SettingError("{setting} is {server:text}'s; it does nothing with {asynchronous}",
                               fields={"setting": name}, setting=getattr(config, name), server=server,
                               asynchronous=config.asynchronous)
    for name, why in ROUND_SETTINGS.items():
        if getattr(config, name) != defaults[name]:
            raise SettingError("{setting} shapes a synchronous round, and {asynchronous} has none ({why:text}); "
                               "remove one of the two", fields={"setting": name}, setting=getattr(config, name),
                               asynchronous=config.asynchronous, why=why)
    if config.client_sampling != defaults["client_sampling"]:
        raise SettingError("{client_sampling} draws a round's clients, and {asynchronous} has no rounds: a client "
                           "that returns is replaced by one drawn from those not training", client_sampling=
                           config.client_sampling, asynchronous=config.asynchronous)
    if config.asynchronous == "fedasync":
        for name in SERVER_SETTINGS:
            if getattr(config, name) != defaults[name]:
                raise SettingError("{setting} is a server step's; fedasync mixes each model in with weight "
                                   "{async_alpha:name} x {staleness:name} instead: leave it out, or use {fedbuff}",
                                   fields={"setting": name, "fedbuff": "asynchronous"}, setting=getattr(config, name),
                                   fedbuff="fedbuff")
