"""Dropout for a cohort of clients: each client's masks drawn from its own stream, outside ``vmap``.

In the loop (`fedsim.client.client_update`) a client's dropout draws its masks from torch's
global generator, seeded for that client alone (``Stream.CLIENT_DROPOUT``). ``vmap`` cannot
draw them: its ``randomness="different"`` would tie the masks to the position in the cohort, not
to any client's seed. So a cohort draws, before each step, every client's masks from a
generator seeded as the loop seeds the global one, in the order and shapes the loop's forward
draws them (``bernoulli_(1 - p)`` on a tensor of the layer's input shape, then ``/ (1 - p)``),
and the dropout layers multiply by them during the vmapped forward. On the CPU the masks are the
loop's, bit for bit.

Only ``nn.Dropout`` (elementwise) is taken; the channel-wise and alpha variants are refused
(`fedsim.engines.inprocess.cohort_refusal.vectorize_refusal`).
"""

from __future__ import annotations

import contextlib

import torch
from torch import nn

from ...data import normalize
from ...seeding import Stream, torch_generator

#: The dropout layers whose masks a cohort draws itself; their subclasses and the others are refused.
ELEMENTWISE = nn.Dropout


def dropout_layers(model: nn.Module) -> list[nn.Module]:
    """Return the model's active dropout layers (``p`` > 0)."""
    return [module for module in model.modules() if isinstance(module, nn.modules.dropout._DropoutNd)
            and module.p > 0]


class CohortDropout:
    """The masks of a cohort's dropout layers for each step, and the layers that apply them in the vmapped forward.

    Parameters
    ----------
    model : nn.Module
        The shared model, whose dropout layers are all ``nn.Dropout``.
    data : fedsim.data.Dataset
        A training image of it is forwarded once to learn each dropout call's input shape.
    """

    def __init__(self, model: nn.Module, data):
        self.model = model
        self.calls = self._calls(model, data)  # (layer, per-sample input shape), in forward order
        self._feed = iter(())

    @staticmethod
    def _calls(model: nn.Module, data) -> list[tuple[nn.Module, torch.Size]]:
        calls = []
        hooks = [layer.register_forward_pre_hook(lambda layer, inputs: calls.append((layer, inputs[0].shape[1:])))
                 for layer in dropout_layers(model)]
        param = next(model.parameters())
        was_training = model.training
        try:
            with torch.no_grad():
                model.eval()(normalize(data.train_images[:1], data, dtype=param.dtype).to(param.device))
        finally:
            model.train(was_training)
            for hook in hooks:
                hook.remove()
        return calls

    def generators(self, seed: int, round_index: int, clients: list[int]) -> list[torch.Generator]:
        """Return each client's dropout generator, seeded as the loop seeds torch's global one for it."""
        return [torch_generator(seed, Stream.CLIENT_DROPOUT, round_index, client) for client in clients]

    def masks(self, generators: list[torch.Generator], counts: list[int], longest: int) -> list[torch.Tensor]:
        """Return one step's masks, one stack per dropout call: each client's drawn for its ``count`` samples.

        A client's rows past its count (a shorter batch's padding) are ones.
        """
        param = next(self.model.parameters())
        stacks = []
        for layer, shape in self.calls:
            keep = 1 - layer.p
            stack = torch.ones(len(counts), longest, *shape, dtype=param.dtype)
            for row, (generator, count) in enumerate(zip(generators, counts)):
                stack[row, :count] = torch.empty(count, *shape, dtype=param.dtype).bernoulli_(keep, generator=generator)
            stacks.append(stack.div_(keep).to(param.device))
        return stacks

    @contextlib.contextmanager
    def applied(self):
        """While inside, the dropout layers multiply by the masks `feed` gives, in call order, instead of drawing."""
        layers = {layer for layer, _ in self.calls}
        for layer in layers:
            layer.forward = lambda inputs: inputs * next(self._feed)
        try:
            yield self
        finally:
            for layer in layers:
                del layer.forward  # the class's own forward again

    def feed(self, masks) -> None:
        """Give the next forward's masks (one client's, inside ``vmap``)."""
        self._feed = iter(masks)
