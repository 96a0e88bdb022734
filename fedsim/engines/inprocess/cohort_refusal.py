"""Why a round's clients cannot train as a cohort (`fedsim.engines.inprocess.vectorized`), decided before training.

`vectorize_refusal` reads the model and the method: what a cohort cannot compute as the loop
does. `automatic_refusal` is where a cohort would compute the same but run slower than the loop,
so that ``vectorize`` left unset keeps the loop.
"""

from __future__ import annotations

from torch import nn

from ...checks import SettingError
from ...support import no_stacked_form
from .cohort_dropout import ELEMENTWISE, dropout_layers
from .random_draws import random_draws_outside_dropout
from .stacked_mlp import plain_layers

#: Why AMP cohorts are a plain multilayer perceptron's alone (`fedsim.engines.inprocess.stacked_mlp`).
VMAP_UNDER_AMP = ("under AMP, torch.func's vmap(grad) does not compute the loop's mixed precision (on the CPU a "
                  "cohort through vmap ended 3x farther from the loop than AMP's own effect); of the cohorts, only a "
                  "plain multilayer perceptron's without a loss of its algorithm's runs under AMP")



def vectorize_refusal(rounds) -> str | SettingError | None:
    """Return why ``rounds``' clients cannot train as a cohort, or ``None`` where they can.

    Parameters
    ----------
    rounds : fedsim.rounds.fedavg.FedAvgRounds
        Whose model, local training and algorithm decide.
    """
    training, model = rounds.training, rounds.model
    if training.amp and plain_layers(model) is None:
        return VMAP_UNDER_AMP
    if training.micro_batches > 1:
        return SettingError("{micro_batches:name} splits a step to save memory; a cohort's memory is bounded by "
                            "{vectorize_chunk:name} instead")
    from torchvision.ops import StochasticDepth  # here: torchvision's ops import torch's compiler, seconds of startup

    if any(isinstance(module, StochasticDepth) and module.p > 0 for module in model.modules()):
        return "stochastic depth draws which blocks to skip from the global random stream, not from each client's own"
    if any(isinstance(module, nn.modules.batchnorm._BatchNorm) for module in model.modules()):
        return "BatchNorm updates its running statistics in place during the forward, which vmap cannot do per client"
    other = next((layer for layer in dropout_layers(model) if type(layer) is not ELEMENTWISE), None)
    if other is not None:
        return (f"{type(other).__name__} drops whole channels or keeps a self-normalizing scale; a cohort draws "
                "the elementwise masks of nn.Dropout for each client")
    if not rounds.algorithm.vectorizable:  # the class's declaration, or the instance's for its model (MOON's)
        return no_stacked_form(rounds.algorithm.name)
    if draws := random_draws_outside_dropout(model, rounds.data):
        return (f"the model draws random numbers in its forward outside nn.Dropout ({', '.join(draws)}), which no "
                "client's own stream can draw")
    return None


def automatic_refusal(rounds) -> SettingError | None:
    """Return why ``vectorize`` left unset keeps the loop although the cohort would compute the same, or ``None``.

    On the CPU, vmap runs a convolution with each client's own weights as one grouped
    convolution, which is slower than the loop's convolutions (``benchmarks/vectorize_speed.py``:
    the McMahan CNN at 0.7x to 1x); ``vectorize``=True runs it anyway.
    """
    on_cpu = next(rounds.model.parameters()).device.type == "cpu"
    if on_cpu and any(isinstance(module, nn.modules.conv._ConvNd) for module in rounds.model.modules()):
        return SettingError("on the CPU a convolution with each client's own weights runs as a grouped convolution, "
                            "slower than the loop ({vectorize} runs it anyway)", vectorize=True)
    return None
