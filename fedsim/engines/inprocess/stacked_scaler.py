"""fp16 loss scaling for a cohort: ``torch.amp.GradScaler``'s dynamic scale, one per client.

In the loop each client trains with a ``GradScaler`` of its own that starts from the round's
scale (`fedsim.client.loss_scale.RoundLossScale.for_client`). A cohort's clients do the same with one
scale per row: a client's loss is multiplied by its scale and its gradients divided by it; a step
with a non-finite gradient is skipped (the client's parameters and optimizer state do not change)
and its scale multiplied by ``backoff_factor``; ``growth_interval`` finite steps in a row multiply
it by ``growth_factor``. Each client's final scale goes back to the round
(`fedsim.client.loss_scale.RoundLossScale.keep`). Scales are powers of two, so scaling and
unscaling are exact.
"""

from __future__ import annotations

import torch


class StackedLossScaler:
    """Each client's loss scale and count of finite steps, for the first ``n`` (active) clients of a cohort.

    Parameters
    ----------
    shared : torch.amp.GradScaler
        The round's scaler, where every client starts.
    clients : int
        The cohort's size.
    device : torch.device
    """

    def __init__(self, shared: torch.amp.GradScaler, clients: int, device: torch.device):
        state = shared.state_dict()
        self.growth, self.backoff, self.interval = (state["growth_factor"], state["backoff_factor"],
                                                    state["growth_interval"])
        self.scales = torch.full((clients,), state["scale"], dtype=torch.float32, device=device)
        self.finite_steps = torch.full((clients,), state["_growth_tracker"], dtype=torch.int32, device=device)

    def unscale(self, gradients: list[torch.Tensor]) -> torch.Tensor:
        """Divide the active clients' ``gradients`` (one row each) by their scales, in place.

        Returns which of them to skip: a bool per client, true where a gradient is not finite.
        """
        active = gradients[0].shape[0]
        inverse = self.scales[:active].double().reciprocal().float()  # GradScaler's: exact for a power of two
        for gradient in gradients:
            gradient.mul_(inverse.view(-1, *[1] * (gradient.dim() - 1)))
        finite = torch.stack([gradient.flatten(1).isfinite().all(1) for gradient in gradients]).all(0)
        return ~finite

    def update(self, skipped: torch.Tensor) -> None:
        """Back off the scales of the clients that skipped their step; grow those finite ``growth_interval`` steps."""
        active = skipped.shape[0]
        scales, finite_steps = self.scales[:active], self.finite_steps[:active]
        counted = finite_steps + 1
        grown = ~skipped & (counted >= self.interval)
        factors = torch.where(skipped, self.backoff, torch.where(grown, self.growth, 1.0))
        scales.mul_(factors.to(scales.dtype))
        finite_steps.copy_(torch.where(skipped | grown, 0, counted))

    def final(self) -> list[tuple[float, int]]:
        """Return each client's scale and count of finite steps since its last change, by row."""
        return list(zip(self.scales.tolist(), self.finite_steps.tolist()))


def saved_rows(tensors: list[torch.Tensor], skipped: torch.Tensor) -> list[torch.Tensor]:
    """Return copies of the ``skipped`` rows of each of ``tensors`` (whose first ``len(skipped)`` rows are active)."""
    return [tensor[: skipped.shape[0]][skipped].clone() for tensor in tensors]


def restore_rows(tensors: list[torch.Tensor], skipped: torch.Tensor, saved: list[torch.Tensor]) -> None:
    """Write `saved_rows`' copies back into ``tensors``: the skipped clients' step undone."""
    for tensor, rows in zip(tensors, saved):
        tensor[: skipped.shape[0]][skipped] = rows
