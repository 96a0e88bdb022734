"""fp16 AMP's loss scale over a round's clients, as clients on devices of their own would keep it.

Each client trains with a loss scaler of its own, started from the round's scale: its training
depends on no other client's, whichever order, worker or cohort trains it, and not on the
initial scale either, whose first steps overflow. The next round starts from the smallest scale
a client of this round ended with, the most cautious. bf16 (the CPU's AMP) needs no scale.
"""

from __future__ import annotations

import torch

from .training import loss_scaler


class RoundLossScale:
    """The loss scale a round's clients start from, and the scales they end with.

    Parameters
    ----------
    amp : bool
        The run's AMP; fp16 only (CUDA) keeps a scale.
    device : torch.device

    Attributes
    ----------
    scaler : torch.amp.GradScaler or None
        The round's scale (``None`` without fp16 AMP).
    ends : list of (float, int)
        The round's clients' scales at their end, with their counts of finite steps since the last change.
    """

    def __init__(self, amp: bool, device: torch.device):
        self.scaler = loss_scaler(amp, device)
        self.device = device
        self.ends: list[tuple[float, int]] = []

    def for_client(self) -> torch.amp.GradScaler | None:
        """Return a client's own fp16 loss scaler, at the round's scale (``None`` without fp16 AMP)."""
        if self.scaler is None:
            return None
        scaler = torch.amp.GradScaler(self.device.type)
        scaler.load_state_dict(self.scaler.state_dict())
        return scaler

    def keep(self, scale: float, growth_count: int) -> None:
        """Note a client's loss scale, and its count of finite steps since the last change, at its end."""
        self.ends.append((scale, growth_count))

    def keep_scaler(self, scaler: torch.amp.GradScaler | None) -> None:
        """Note where a client's own scaler (`for_client`) ended (nothing without fp16 AMP)."""
        if scaler is not None:
            state = scaler.state_dict()
            self.keep(state["scale"], state["_growth_tracker"])

    def settle(self) -> None:
        """Start the next round from the smallest scale a client of this round ended with, the most cautious."""
        if self.ends:
            state = self.scaler.state_dict()
            state["scale"], state["_growth_tracker"] = min(self.ends)
            self.scaler.load_state_dict(state)
            self.ends = []

    def state_dict(self) -> dict | None:
        """Return the round's scale (``None`` without fp16 AMP)."""
        return None if self.scaler is None else self.scaler.state_dict()

    def load_state_dict(self, state: dict | None) -> None:
        """Restore `state_dict` output (a checkpoint without a scale leaves it as it is)."""
        if self.scaler is not None and state is not None:
            self.scaler.load_state_dict(state)
