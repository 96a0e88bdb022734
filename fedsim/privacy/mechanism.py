"""DP-FedAvg's round on the server: clip each client's update, add the clipped updates, noise the sum, divide.

`ClientPrivacy` is what `fedsim.rounds.fedavg.FedAvgRounds` holds where a run sets ``dp_clip``.
Every engine hands the round its clients' trained models (`FedAvgRounds.hand_in`), so the clip,
the noise and the adaptive clip are written once here and run the same in one process, in
``--workers``, on DDP's ranks and on Flower's server:

1. a client's update ``delta = trained - global``, all its tensors one flat vector, is clipped to
   L2 norm C: ``delta * min(1, C / |delta|)``, and added to the round's sum; with adaptive
   clipping, its bit ``[|delta| <= C] - 1/2`` is added to the round's count;
2. once the processes' sums are added up, Gaussian noise of standard deviation ``z C`` (``z'`` C
   with adaptive clipping) is added to the sum, drawn from the run's seed and the round
   (`fedsim.seeding.Stream.DP_NOISE`), so every engine draws the same;
3. the noised sum is divided by the expected number of clients qN, whatever the number that
   came: the weights are alike and fixed, so that one client moves the result by at most C / qN;
4. the result is the mean delta the server optimizer steps with, as in every round;
5. adaptive clipping (Andrew et al., NeurIPS 2021, as TensorFlow Privacy's quantile estimator):
   the noised count over qN, plus 1/2 and clamped to [0, 1], is the share of updates not
   clipped, and ``C <- C exp(-lr (share - quantile))`` for the next round.
"""

from __future__ import annotations

import math

import torch

from ..seeding import Stream, torch_generator
from .plan import PrivacyPlan


class ClientPrivacy:
    """The server's side of client-level DP for one run (module text).

    Parameters
    ----------
    plan : PrivacyPlan
    global_state : list of Tensor
        The round's global tensors (parameters, then floating-point buffers), which every update is taken from.
    seed : int
        The run's seed, which the noise is drawn from.

    Attributes
    ----------
    clip : float
        The clip norm of the next round (adaptive clipping moves it; a checkpoint keeps it).
    count : Tensor
        The round's sum of the clients' shifted bits ``[|delta| <= C] - 1/2``: a sum the processes add up.
    """

    def __init__(self, plan: PrivacyPlan, global_state: list[torch.Tensor], seed: int):
        self.plan, self.global_state, self.seed = plan, global_state, seed
        self.clip = plan.clip
        self.rounds = 0  # released so far: what the accountant composes
        self.update_noise = plan.update_noise
        self.count = torch.zeros((), dtype=torch.float64, device=global_state[0].device)

    def begin_round(self) -> None:
        """Zero the round's count."""
        self.count.zero_()

    @property
    def round_sums(self) -> list[torch.Tensor]:
        """The tensors summed over the round's clients besides the updates (the count), for the processes to add up."""
        return [self.count]

    @torch.no_grad()
    def add_update(self, total: list[torch.Tensor], trained: list[torch.Tensor]) -> float:
        """Add the clipped update of one client's ``trained`` tensors to ``total``; return its norm before clipping."""
        delta = torch._foreach_sub(list(trained), self.global_state)
        norm = float(torch.linalg.vector_norm(torch.stack(torch._foreach_norm(delta))))
        torch._foreach_add_(total, delta, alpha=min(1.0, self.clip / norm) if norm > 0 else 1.0)
        self.count += (1.0 if norm <= self.clip else 0.0) - 0.5
        return norm

    @torch.no_grad()
    def release(self, total: list[torch.Tensor], round_index: int) -> None:
        """Turn ``total``, the round's clipped sum added up over the processes, into the round's combination, in place.

        Noise, division by qN, and the global model added back, so that the method's `to_delta`
        and the server step take it as they take any round's weighted mean of trained models.
        Then, with adaptive clipping, the clip moves for the next round.
        """
        generator = torch_generator(self.seed, Stream.DP_NOISE, round_index)
        if std := self.update_noise * self.clip:
            for tensor in total:
                tensor.add_(torch.randn(tensor.shape, generator=generator, dtype=tensor.dtype).to(tensor.device),
                            alpha=std)
        torch._foreach_mul_(total, 1.0 / self.plan.sampling.per_round)
        torch._foreach_add_(total, self.global_state)
        if self.plan.quantile is not None:
            count_noise = float(torch.randn((), generator=generator, dtype=torch.float64)) * self.plan.count_noise
            self.clip = self.next_clip(float(self.count) + count_noise)
        self.rounds += 1

    def next_clip(self, noised_count: float) -> float:
        """Return the next round's clip from this round's noised count of shifted bits (module text, step 5)."""
        unclipped = min(1.0, max(0.0, noised_count / self.plan.sampling.per_round + 0.5))
        return self.clip * math.exp(-self.plan.clip_lr * (unclipped - self.plan.quantile))

    def state_dict(self) -> dict:
        """Return the next round's clip and the rounds released, for a checkpoint (the noise is the round's own)."""
        return {"clip": self.clip, "rounds": self.rounds}

    def load_state_dict(self, state: dict) -> None:
        """Restore `state_dict` output: the accountant goes on from the rounds it had composed."""
        self.clip, self.rounds = float(state["clip"]), int(state["rounds"])
