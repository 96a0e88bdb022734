"""The settings of client-level differential privacy and of the sampling its accountant is told: what a
`fedsim.config.RunConfig` refuses of them before any work (`fedsim.privacy` is the mechanism and the accountant).

The rest is refused where the method is known (`fedsim.support.privacy_refusal`): a method that
weighs or combines clients its own way, or whose clients send more than their update.
"""

from __future__ import annotations

from ..checks import SettingError, check_choice
from ..privacy.accountant import ACCOUNTANTS, SAMPLINGS, pld_refusal

#: The settings that mean something only with ``dp_clip``.
DP_SETTINGS = ("dp_noise", "dp_target_epsilon", "dp_delta", "dp_accountant", "dp_adaptive_quantile", "dp_clip_lr",
               "dp_count_noise")
#: The settings that give the noise multiplier, one of which ``dp_clip`` needs.
NOISE_SETTINGS = ("dp_noise", "dp_target_epsilon")
#: The settings that mean something only with ``dp_adaptive_quantile``.
ADAPTIVE_SETTINGS = ("dp_clip_lr", "dp_count_noise")


def privacy_weights(config) -> str | None:
    """Return the weight rule ``config`` runs with when it leaves ``weights`` unset: equal under client-level DP."""
    return "equal" if config.weights is None and config.dp_clip is not None else config.weights


def check_privacy(config, defaults: dict) -> None:
    """Refuse client-level DP settings that contradict each other or the run's weights, one error naming them.

    Parameters
    ----------
    config : RunConfig
        Its strategy's own settings are checked already (a gradient strategy never reads these).
    defaults : dict
        Every field's default.
    """
    check_choice("client_sampling", config.client_sampling, SAMPLINGS)
    check_choice("dp_accountant", config.dp_accountant, ACCOUNTANTS)
    if config.dp_clip is None:
        _refuse_unread(config, DP_SETTINGS, defaults, "dp_clip", "client-level DP is off")
        return
    if config.dp_adaptive_quantile is None:
        _refuse_unread(config, ADAPTIVE_SETTINGS, defaults, "dp_adaptive_quantile", "the clip is fixed")
    if config.dp_noise is not None and config.dp_target_epsilon is not None:
        raise SettingError("{dp_noise} and {dp_target_epsilon} both set the noise multiplier; give one of the two",
                           dp_noise=config.dp_noise, dp_target_epsilon=config.dp_target_epsilon)
    if config.dp_noise is None and config.dp_target_epsilon is None:
        raise SettingError("{dp_clip} needs a noise multiplier: give {dp_noise:name} (z >= 0; 0 clips without noise) "
                           "or {dp_target_epsilon:name} (the epsilon the run may spend)", dp_clip=config.dp_clip,
                           dp_noise=None, dp_target_epsilon=None)
    if config.weights != "equal":
        raise SettingError("{weights} weighs clients unalike, so that one client may move the sum by more than "
                           "{dp_clip:name}: client-level DP weighs every client alike; leave {weights:name} out or "
                           "set it to {equal}", weights=config.weights, dp_clip=config.dp_clip,
                           fields={"equal": "weights"}, equal="equal")
    if config.dp_accountant == "pld" and config.client_sampling == "fixed":
        raise pld_refusal(config.client_sampling)


def _refuse_unread(config, names, defaults: dict, needed: str, why: str) -> None:
    """Refuse the first of ``names`` set away from its default, which does nothing without ``needed``."""
    for name in names:
        if (value := getattr(config, name)) != defaults[name]:
            raise SettingError("{setting} does nothing without {needed:name} ({why:text}); remove it or set "
                               "{needed:name}", fields={"setting": name, "needed": needed}, setting=value,
                               needed=getattr(config, needed), why=why)
