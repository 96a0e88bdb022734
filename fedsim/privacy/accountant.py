"""The ε that DP-FedAvg's rounds spend, for the client sampling that ran (dp-accounting's RDP and PLD accountants).

A round of DP-FedAvg (McMahan et al., ICLR 2018) releases the sum of the sampled clients' updates,
each clipped to L2 norm C, plus Gaussian noise of standard deviation ``z C``: a Gaussian mechanism
of noise multiplier z on one client's contribution, amplified by the sampling of the round's
clients. The accountant is told the sampling that ran, never an approximation of it:

- ``poisson``: each of N clients takes part in a round independently with probability q; the
  neighbouring runs differ by one client added or removed:
  ``PoissonSampledDpEvent(q, GaussianDpEvent(z))``, under RDP or PLD;
- ``fixed``: m of the N clients, drawn without replacement, as fedsim's rounds draw them by
  default; the neighbouring runs differ by one client replaced, which moves the clipped sum by up
  to 2C, so the Gaussian's multiplier on that sensitivity is z / 2:
  ``SampledWithoutReplacementDpEvent(N, m, GaussianDpEvent(z / 2))``, under RDP only (the PLD
  accountant of dp-accounting does not take it).

The rounds compose as one event with a count (``SelfComposedDpEvent``): a resumed run's ε is
its rounds' whatever the breaks, and composing a round at a time, which costs 30 ms (RDP) to
230 ms (PLD) a round on a 2-core CPU, is never needed. dp-accounting is an optional extra
(``pip install 'fedsim[dp]'``); this module imports it only when asked for a number.
"""

from __future__ import annotations

import contextlib
import logging
import math
from dataclasses import dataclass

from ..checks import SettingError, check_choice, check_integer, check_number

ACCOUNTANTS = ("rdp", "pld")
SAMPLINGS = ("poisson", "fixed")
#: The install line of dp-accounting, the accountant's package.
DP_INSTALL = "pip install 'fedsim[dp]'"
#: The PLD accountant's discretization of privacy losses: dp-accounting's default, within 1e-3 of the limit.
PLD_DISCRETIZATION = 1e-4


@dataclass(frozen=True)
class ClientSampling:
    """How a round's clients are drawn, as the accountant needs it.

    Parameters
    ----------
    kind : {"poisson", "fixed"}
        Each client independently with probability ``per_round / num_clients``, or ``per_round``
        clients without replacement.
    num_clients : int
        N, the clients that may be sampled.
    per_round : float
        m: the clients of a fixed-size round, or the expected number of a Poisson round (qN).
    """

    kind: str
    num_clients: int
    per_round: float

    def __post_init__(self):
        check_choice("client_sampling", self.kind, SAMPLINGS)
        num_clients = check_integer("num_clients", self.num_clients, minimum=1)
        if self.kind == "fixed":
            check_integer("per_round", self.per_round, minimum=1)
        check_number("per_round", self.per_round, low=0.0, high=num_clients, low_open=True, high_closed=True)

    @property
    def rate(self) -> float:
        """The chance q that a given client takes part in a round."""
        return self.per_round / self.num_clients


def epsilon(sampling: ClientSampling, noise_multiplier: float, rounds: int, delta: float,
            accountant: str = "rdp") -> float:
    """Return the ε at ``delta`` that ``rounds`` rounds of DP-FedAvg spend (module text).

    Parameters
    ----------
    sampling : ClientSampling
    noise_multiplier : float
        z: the noise's standard deviation over the clip norm C; 0 spends an infinite ε.
    rounds : int
        Rounds run so far (0 spends nothing).
    delta : float
        In (0, 1).
    accountant : {"rdp", "pld"}

    Examples
    --------
    >>> round(epsilon(ClientSampling("poisson", 10_000, 400), 1.5, 2250, 1e-5), 4)  # q = 0.04
    7.3293
    """
    rounds = check_integer("rounds", rounds, minimum=0)
    noise_multiplier = check_number("noise_multiplier", noise_multiplier, low=0.0)
    delta = check_number("delta", delta, low=0.0, high=1.0, low_open=True)
    if rounds == 0:
        return 0.0
    if noise_multiplier == 0.0:
        return math.inf
    dp = _dp_accounting()
    ledger = _accountant(accountant, sampling)
    with _quiet_orders():
        ledger.compose(dp.SelfComposedDpEvent(round_event(sampling, noise_multiplier), rounds))
        return float(ledger.get_epsilon(delta))


def noise_for_epsilon(target_epsilon: float, sampling: ClientSampling, rounds: int, delta: float,
                      accountant: str = "rdp") -> float:
    """Return the smallest noise multiplier z whose ``rounds`` rounds spend at most ``target_epsilon`` at ``delta``.

    Found before training by dp-accounting's search (Brent's method to within 1e-6 of z), as
    Opacus's ``make_private_with_epsilon`` finds its z.
    """
    target_epsilon = check_number("target_epsilon", target_epsilon, low=0.0, low_open=True)
    check_integer("rounds", rounds, minimum=1)
    delta = check_number("delta", delta, low=0.0, high=1.0, low_open=True)
    _accountant(accountant, sampling)  # refused here, before the search, where it cannot account the sampling
    dp = _dp_accounting()
    with _quiet_orders():
        return float(dp.calibrate_dp_mechanism(
            lambda: _accountant(accountant, sampling),
            lambda z: dp.SelfComposedDpEvent(round_event(sampling, z), rounds), target_epsilon, delta))


def round_event(sampling: ClientSampling, noise_multiplier: float):
    """Return one round's ``DpEvent``: the Gaussian mechanism on one client, amplified by the round's sampling."""
    dp = _dp_accounting()
    if sampling.kind == "poisson":
        return dp.PoissonSampledDpEvent(sampling.rate, dp.GaussianDpEvent(noise_multiplier))
    # one client replaced moves the clipped sum by up to 2C: the multiplier on that sensitivity is z / 2
    return dp.SampledWithoutReplacementDpEvent(sampling.num_clients, int(sampling.per_round),
                                               dp.GaussianDpEvent(noise_multiplier / 2))


def _accountant(name: str, sampling: ClientSampling):
    """Return a fresh accountant ``name`` under the neighbouring relation of ``sampling``."""
    check_choice("dp_accountant", name, ACCOUNTANTS)
    dp = _dp_accounting()
    if sampling.kind == "poisson":
        relation = dp.NeighboringRelation.ADD_OR_REMOVE_ONE
    elif name == "pld":
        raise pld_refusal(sampling.kind)
    else:
        relation = dp.NeighboringRelation.REPLACE_ONE
    if name == "rdp":
        from dp_accounting.rdp import RdpAccountant

        return RdpAccountant(neighboring_relation=relation)
    from dp_accounting.pld import PLDAccountant

    return PLDAccountant(neighboring_relation=relation, value_discretization_interval=PLD_DISCRETIZATION)


@contextlib.contextmanager
def _quiet_orders():
    """Keep dp-accounting's RDP from logging each order it leaves out where its series does not converge.

    It logs a warning per order and per call (a line per order every round of a run); the orders
    it leaves out are the ones that would not have given the smallest epsilon.
    """
    logger = logging.getLogger("absl")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        logger.setLevel(level)


def pld_refusal(client_sampling: str) -> SettingError:
    """Return the refusal of the PLD accountant for ``client_sampling`` (fixed), which it cannot account."""
    return SettingError("{dp_accountant} cannot account {client_sampling}: dp-accounting's PLD accountant does not "
                        "take sampling without replacement; use {rdp} or {poisson}", dp_accountant="pld",
                        client_sampling=client_sampling, fields={"rdp": "dp_accountant", "poisson": "client_sampling"},
                        rdp="rdp", poisson="poisson")


def _dp_accounting():
    """Return the ``dp_accounting`` module, or refuse with the install line where it is missing."""
    try:
        import dp_accounting
    except ModuleNotFoundError:
        raise ModuleNotFoundError(f"client-level differential privacy accounts with dp-accounting, which is not "
                                  f"installed: {DP_INSTALL}") from None
    return dp_accounting
