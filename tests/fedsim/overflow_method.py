"""A method whose run diverges in a known round on any CPU, for the divergence tests (named by reference).

Whether and when float32 training with a large learning rate overflows is the arithmetic's
choice (kernels and summation orders differ between CPUs), so a test of what happens at a
divergence cannot wait for one. This method is FedAvg until the end of the round before
``round``, when it multiplies the model's first weight matrix by 1e25 and divides its last by
1e25. A ReLU network computes nearly the same function (the biases aside), so that round's
evaluation is finite; but the last layer's gradient is now 1e25 times larger, and in
``round`` a client's second step computes logits near 1e50, which overflow float32 on any kernel.
"""

import torch

from fedsim.algorithms import Algorithm, Option

GROWTH = 1e25


class OverflowInRound(Algorithm):
    """FedAvg whose model is finite after round ``round`` - 1 and whose training loss in round ``round`` is not."""

    name = "overflow"
    options = {"round": Option(4, low=2, help="the round whose training loss is not finite")}

    def __init__(self, config, model, global_state):
        super().__init__(config, model, global_state)
        self.global_state, self.rounds_ended = global_state, 0

    @torch.no_grad()
    def end_round(self):
        self.rounds_ended += 1
        if self.rounds_ended == self.option("round") - 1:  # the server has stepped the global model in place
            matrices = [tensor for tensor in self.global_state[: self.num_params] if tensor.dim() > 1]
            matrices[0].mul_(GROWTH)
            matrices[-1].div_(GROWTH)
