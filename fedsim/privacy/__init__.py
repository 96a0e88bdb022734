"""Client-level differential privacy: the accountant of DP-FedAvg's rounds (`fedsim.privacy.accountant`)."""

from .accountant import ACCOUNTANTS, SAMPLINGS, ClientSampling, epsilon, noise_for_epsilon

__all__ = ["ACCOUNTANTS", "SAMPLINGS", "ClientSampling", "epsilon", "noise_for_epsilon"]
