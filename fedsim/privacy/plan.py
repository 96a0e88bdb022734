"""What a run's client-level DP is, resolved from its settings before any training: `PrivacyPlan`.

The round (`fedsim.privacy.mechanism.ClientPrivacy`), the run's banner and the run's summary read
the same plan: the sampling the accountant is told, the noise multiplier (given, or found for a
target ε), and adaptive clipping's split of the noise between the update and the clipped count.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

from ..checks import SettingError
from .accountant import ClientSampling, epsilon, noise_for_epsilon


@dataclass(frozen=True)
class PrivacyPlan:
    """Client-level DP of one run (DP-FedAvg, McMahan et al., ICLR 2018).

    Attributes
    ----------
    sampling : fedsim.privacy.ClientSampling
        The clients a round samples, as the accountant takes them; ``sampling.per_round`` (qN, the
        expected number of clients) divides every round's noised sum.
    noise_multiplier : float
        z: the ε is accounted for it.
    clip : float
        The clip norm C (the first round's, with adaptive clipping).
    delta : float
    accountant : {"rdp", "pld"}
    rounds : int
        The run's rounds (a target ε is spent over them).
    quantile : float or None
        Adaptive clipping's target quantile γ; ``None``: the clip stays C.
    clip_lr : float
        Adaptive clipping's geometric learning rate.
    count_noise : float
        sigma_b, the standard deviation of the noise on a round's count of unclipped updates.
    """

    sampling: ClientSampling
    noise_multiplier: float
    clip: float
    delta: float
    accountant: str
    rounds: int
    quantile: float | None
    clip_lr: float
    count_noise: float

    @classmethod
    def for_config(cls, config, population: int) -> PrivacyPlan | None:
        """Return ``config``'s plan over ``population`` training clients, ``None`` without ``dp_clip``.

        A target ε is turned into z here (by search).
        """
        if config.dp_clip is None:
            return None
        sampling = client_sampling(config, population)
        noise = config.dp_noise
        if noise is None:
            noise = _noise_for(config.dp_target_epsilon, sampling, config.rounds, config.dp_delta,
                               config.dp_accountant)
        count_noise = config.dp_count_noise if config.dp_count_noise is not None else sampling.per_round / 20
        plan = cls(sampling, noise, config.dp_clip, config.dp_delta, config.dp_accountant, config.rounds,
                   config.dp_adaptive_quantile, config.dp_clip_lr, count_noise)
        plan.update_noise  # a noise multiplier that leaves none for the update is refused before any work
        return plan

    @property
    def update_noise(self) -> float:
        """The noise multiplier on the clipped sum: z, or with adaptive clipping the z' that leaves the count its share,
        ``(z^-2 - (2 sigma_b)^-2)^(-1/2)`` (Andrew et al., NeurIPS 2021): the two together spend what z alone would.

        The count's sensitivity is 1/2 (each client adds its bit less 1/2), so its multiplier is 2 sigma_b.
        """
        z = self.noise_multiplier
        if self.quantile is None or z == 0.0:
            return z
        if z >= 2 * self.count_noise:
            raise SettingError("{dp_noise} leaves no noise for the update once the clipped count takes its share: "
                               "with {dp_adaptive_quantile:name} it must be below twice {dp_count_noise:name} "
                               "({twice:text}); raise {dp_count_noise:name} or lower {dp_noise:name}",
                               dp_noise=z, dp_adaptive_quantile=self.quantile, dp_count_noise=self.count_noise,
                               twice=f"{2 * self.count_noise:g}")
        return (z**-2 - (2 * self.count_noise) ** -2) ** -0.5

    def epsilon(self, rounds: int) -> float:
        """Return the ε at ``delta`` that ``rounds`` rounds spend (infinite with no noise)."""
        return _epsilon(self.sampling, self.noise_multiplier, rounds, self.delta, self.accountant)

    def describe(self) -> str:
        """Return the banner's line: the mechanism, the sampling and the ε the whole run will spend."""
        clip = f"adaptive clip from C={self.clip:g} (quantile {self.quantile:g})" if self.quantile is not None else \
            f"clip C={self.clip:g}"
        spent = self.epsilon(self.rounds)
        shown = "infinite (no noise)" if math.isinf(spent) else f"{spent:.3f}"
        return (f"client-level DP: {clip}, noise z={self.noise_multiplier:.4g}, {self.sampling.kind} sampling "
                f"q={self.sampling.rate:.4g} of N={self.sampling.num_clients}; epsilon {shown} at delta="
                f"{self.delta:g} after {self.rounds} round{'s' * (self.rounds != 1)} ({self.accountant})")

    def record(self, rounds: int, clip: float) -> dict:
        """Return what the run's summary records after ``rounds`` rounds, with the clip ``clip`` now."""
        return {"dp_epsilon": self.epsilon(rounds), "dp_delta": self.delta, "dp_accountant": self.accountant,
                "dp_sampling": self.sampling.kind, "dp_sampling_rate": self.sampling.rate,
                "dp_population": self.sampling.num_clients, "dp_noise_multiplier": self.noise_multiplier,
                "dp_update_noise_multiplier": self.update_noise, "dp_clip": self.clip, "dp_final_clip": clip,
                "dp_rounds": rounds}


def client_sampling(config, population: int) -> ClientSampling:
    """Return the sampling of ``config``'s rounds over ``population``, its training clients (those not held out).

    A fixed round takes ``max(1, round(fraction * N))`` clients (`fedsim.schedule.sample_clients`),
    a Poisson round each with probability ``fraction``.
    """
    if config.client_sampling == "poisson":
        return ClientSampling("poisson", population, config.fraction * population)
    return ClientSampling("fixed", population, min(population, max(1, int(round(config.fraction * population)))))


@functools.lru_cache(maxsize=64)
def _noise_for(target: float, sampling: ClientSampling, rounds: int, delta: float, accountant: str) -> float:
    """`fedsim.privacy.noise_for_epsilon`, once per plan in a process (the banner and the rounds both ask)."""
    return noise_for_epsilon(target, sampling, rounds, delta, accountant)


@functools.lru_cache(maxsize=1024)
def _epsilon(sampling: ClientSampling, noise: float, rounds: int, delta: float, accountant: str) -> float:
    """`fedsim.privacy.epsilon`, once per round count in a process (the row and the summary both ask)."""
    return epsilon(sampling, noise, rounds, delta, accountant)
