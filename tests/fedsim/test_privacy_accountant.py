"""The accountant of client-level DP-FedAvg: the published ε, the sampling that ran, z found for a target ε."""

import math
import sys

import pytest
from scipy import optimize, stats

from fedsim.privacy import ClientSampling, epsilon, noise_for_epsilon

pytest.importorskip("dp_accounting", reason="the dp extra: pip install 'fedsim[dp]'")

# q = 0.04, z = 1.5, 2,250 rounds, delta = 1e-5: the published example of Opacus's and dp-accounting's tests
POISSON = ClientSampling("poisson", 10_000, 400)
PUBLISHED = {"z": 1.5, "rounds": 2250, "delta": 1e-5}


def test_rdp_gives_the_published_epsilon():
    # Opacus's test: 7.32911117143; dp-accounting bounds the fractional orders from above (7.32933)
    assert epsilon(POISSON, PUBLISHED["z"], PUBLISHED["rounds"], PUBLISHED["delta"]) == pytest.approx(
        7.32911117143, abs=1e-3)


def test_pld_is_tighter_than_rdp_on_the_same_rounds():
    pld = epsilon(POISSON, PUBLISHED["z"], PUBLISHED["rounds"], PUBLISHED["delta"], accountant="pld")
    assert pld == pytest.approx(6.77, abs=5e-3) and pld < epsilon(POISSON, 1.5, 2250, 1e-5)


def exact_gaussian_epsilon(mu: float, delta: float) -> float:
    """Return the exact ε at ``delta`` of a Gaussian mechanism of sensitivity over noise ``mu`` (Balle & Wang 2018)."""
    def excess(eps):
        return stats.norm.cdf(-eps / mu + mu / 2) - math.exp(eps) * stats.norm.cdf(-eps / mu - mu / 2) - delta

    return optimize.brentq(excess, 0.0, 100.0)


def test_a_fixed_round_of_every_client_is_the_gaussian_mechanism_on_twice_the_clip():
    # m = N: no amplification; replacing one client moves the clipped sum by up to 2C, against noise z C, and
    # T such rounds are one Gaussian mechanism with mu = 2 sqrt(T) / z. RDP bounds its exact epsilon from above.
    z, rounds, delta = 4.0, 10, 1e-5
    exact = exact_gaussian_epsilon(2 * math.sqrt(rounds) / z, delta)
    accounted = epsilon(ClientSampling("fixed", 10, 10), z, rounds, delta)
    assert exact < accounted < 1.25 * exact


def test_fixed_size_rounds_spend_more_than_poisson_rounds_of_the_same_rate():
    fixed = epsilon(ClientSampling("fixed", 100, 4), 1.5, 2250, 1e-5)
    assert fixed == pytest.approx(52.3286, abs=1e-3) and fixed > epsilon(ClientSampling("poisson", 100, 4), 1.5, 2250,
                                                                          1e-5)


def test_the_noise_found_for_a_target_epsilon_spends_it_and_no_less_noise_would():
    z = noise_for_epsilon(8.0, POISSON, 2250, 1e-5)
    assert z == pytest.approx(1.41587, abs=1e-4)
    assert epsilon(POISSON, z, 2250, 1e-5) <= 8.0 < epsilon(POISSON, 0.999 * z, 2250, 1e-5)


def test_no_round_spends_nothing_and_no_noise_spends_everything():
    assert epsilon(POISSON, 1.5, 0, 1e-5) == 0.0 and epsilon(POISSON, 0.0, 1, 1e-5) == math.inf
    assert epsilon(POISSON, 1.5, 100, 1e-5) < epsilon(POISSON, 1.5, 200, 1e-5)


@pytest.mark.parametrize("call, message", [
    (lambda: epsilon(ClientSampling("fixed", 100, 4), 1.5, 10, 1e-5, accountant="pld"),
     r"`dp_accountant`='pld' cannot account `client_sampling`='fixed'.*use `dp_accountant`='rdp'"),
    (lambda: epsilon(POISSON, 1.5, 10, 0.0), r"`delta` must be in \(0.0, 1.0\), got 0.0"),
    (lambda: ClientSampling("fixed", 10, 11), r"`per_round` must be in \(0.0, 10\], got 11"),
    (lambda: ClientSampling("uniform", 10, 2), r"unknown `client_sampling`='uniform'; known: poisson, fixed"),
    (lambda: epsilon(POISSON, 1.5, 10, 1e-5, accountant="gdp"), r"unknown `dp_accountant`='gdp'"),
])
def test_what_the_accountant_cannot_take_is_refused_naming_it(call, message):
    with pytest.raises(ValueError, match=message):
        call()


def test_without_the_package_the_error_gives_the_install_line(monkeypatch):
    monkeypatch.setitem(sys.modules, "dp_accounting", None)
    with pytest.raises(ModuleNotFoundError, match=r"pip install 'fedsim\[dp\]'"):
        epsilon(POISSON, 1.5, 10, 1e-5)
