"""MOON's model-contrastive loss (Li, He and Song, "Model-Contrastive Federated Learning", CVPR 2021).

A client adds ``mu * l_con`` to its task loss, per sample::

    l_con = -log( exp(sim(z, z_glob) / T) / (exp(sim(z, z_glob) / T) + exp(sim(z, z_prev) / T)) )

with ``sim`` the cosine similarity and ``z``, ``z_glob``, ``z_prev`` the representations of the
sample under the model being trained, the round's global model and the client's model from its
last round (both frozen, in eval mode, as in the reference code). It pulls the local
representation towards the global one and away from the client's own drifted one.

The representation: MOON adds a projection head to each network and contrasts its output. A
model with a ``representation(inputs)`` method (a user's, with its own head) is contrasted on
what that method returns, at the cost of a second pass through it. fedsim's classifiers have
none, so the representation is the input of the classifier's last linear layer
(`representation_layer`), the penultimate features, captured in the one forward pass: the 200 hidden units of the
2NN, the 512 of the McMahan CNN, the 84 of simple-cnn, the pooled features of the ResNet,
MobileNet, EfficientNet and VGG, and the class token of the ViT and Swin. A client that has
not trained before has no previous model, and its term is zero, as in the reference code's
first round (its pool of previous models is empty).
"""

from __future__ import annotations

import contextlib
import copy

import torch
from torch import nn
from torch.func import functional_call, vmap
from torch.nn import functional as F

from ..client.update import set_state
from .base import Algorithm, LocalTerms, Option
from .client_state import ClientStates


def representation_layer(model: nn.Module) -> nn.Linear:
    """Return the classifier's last linear layer, whose input is the representation MOON contrasts.

    Raises
    ------
    ValueError
        If the model has no linear layer.
    """
    linear = [module for module in model.modules() if isinstance(module, nn.Linear)]
    if not linear:
        raise ValueError(f"{type(model).__name__} has no linear layer whose input could serve as MOON's "
                         "representation")
    return linear[-1]


@contextlib.contextmanager
def captured_representation(model: nn.Module):
    """Yield a list whose last item, after each forward of ``model``, is the batch's flattened representation."""
    captured: list[torch.Tensor] = []

    def keep(module, inputs):
        captured[:] = [inputs[0].flatten(1)]

    handle = representation_layer(model).register_forward_pre_hook(keep)
    try:
        yield captured
    finally:
        handle.remove()


def representation(model: nn.Module, inputs: torch.Tensor, captured: list | None = None) -> torch.Tensor:
    """Return the batch's flattened representation under ``model``: its ``representation`` method's, else the input
    of its last linear layer (``captured`` from the forward just made, or a new forward)."""
    if hasattr(model, "representation"):
        return model.representation(inputs).flatten(1)
    if captured:
        return captured[-1]
    with captured_representation(model) as kept:
        model(inputs)
    return kept[-1]


class ModelContrast:
    """The frozen global and previous models of MOON, shared by every client, and each client's contrast.

    One pair of model copies serves every client (loaded as each trains), as one model object
    serves every client's training.

    Parameters
    ----------
    model : nn.Module
        The model clients train (copied twice, once per run).
    mu : float
        The weight of the contrastive term.
    temperature : float
        The softmax temperature T.
    """

    def __init__(self, model: nn.Module, *, mu: float, temperature: float):
        self.mu, self.temperature = mu, temperature
        self.global_model = copy.deepcopy(model).eval().requires_grad_(False)
        self.previous_model = copy.deepcopy(model).eval().requires_grad_(False)

    def for_client(self, global_state: list[torch.Tensor], previous_state: list[torch.Tensor] | None):
        """Return the client's contrast against ``global_state`` and its ``previous_state``; ``None`` without one."""
        if previous_state is None:
            return None
        return ClientContrast(self, global_state, previous_state)

    def loss(self, local: torch.Tensor, glob: torch.Tensor, previous: torch.Tensor) -> torch.Tensor:
        """Return ``mu * l_con`` of each sample from its three representations."""
        logits = torch.stack([F.cosine_similarity(local, glob, dim=-1),
                              F.cosine_similarity(local, previous, dim=-1)], dim=-1) / self.temperature
        # the positive pair is class 0
        return self.mu * F.cross_entropy(logits, torch.zeros_like(logits[:, 0], dtype=torch.int64), reduction="none")


class ClientContrast(LocalTerms):
    """One client's model-contrastive loss: its representation against the global and its previous model's."""

    def __init__(self, contrast: ModelContrast, global_state: list[torch.Tensor], previous_state: list[torch.Tensor]):
        self.contrast, self.global_state, self.previous_state = contrast, global_state, previous_state
        self._local: list[torch.Tensor] = []
        self._model: nn.Module | None = None

    @contextlib.contextmanager
    def training(self, model: nn.Module):
        """While the client trains ``model``: the frozen models hold its two states, and each forward's
        representation is captured (or its own method called)."""
        set_state(self.contrast.global_model, self.global_state)
        set_state(self.contrast.previous_model, self.previous_state)
        self._model = model
        if hasattr(model, "representation"):
            yield self
            return
        with captured_representation(model) as self._local:
            yield self

    def sample_loss(self, inputs: torch.Tensor, outputs: torch.Tensor) -> torch.Tensor:
        """Return ``mu * l_con`` for each sample of the batch the trained model has just forwarded."""
        local = representation(self._model, inputs, self._local)
        with torch.no_grad():
            glob = representation(self.contrast.global_model, inputs)
            previous = representation(self.contrast.previous_model, inputs)
        return self.contrast.loss(local, glob, previous)

    @classmethod
    def stacked(cls, terms: list[ClientContrast | None]) -> StackedContrast | None:
        """The cohort's contrasts, previous models stacked (a client without one has no term); ``None`` for a model
        with its own ``representation`` method, which a second pass outside the vmapped forward would need."""
        present = [term for term in terms if term is not None]
        contrast = present[0].contrast
        if hasattr(contrast.global_model, "representation"):
            return None
        return StackedContrast(contrast, present[0].global_state,
                               [None if term is None else term.previous_state for term in terms])


class StackedContrast(LocalTerms):
    """MOON's contrast for a cohort: the global model's representation of every client's batch in one forward, each
    client's previous model's from its stacked parameters, and each client's loss inside the vmapped forward."""

    def __init__(self, contrast: ModelContrast, global_state: list[torch.Tensor],
                 previous: list[list[torch.Tensor] | None]):
        self.contrast = contrast
        set_state(contrast.global_model, global_state)
        names = [name for name, _ in contrast.previous_model.named_parameters()]
        # a client without a previous model contrasts nothing: a placeholder row, its term multiplied by 0
        self.previous = {name: torch.stack([(state or global_state)[index] for state in previous])
                         for index, name in enumerate(names)}
        self.has_previous = torch.tensor([state is not None for state in previous], dtype=global_state[0].dtype,
                                         device=global_state[0].device)
        self._local: list[torch.Tensor] = []

    @contextlib.contextmanager
    def training(self, model: nn.Module):
        """While the cohort trains ``model`` (vmapped): each forward's representation is captured."""
        with captured_representation(model) as self._local:
            yield self

    @torch.no_grad()
    def step_inputs(self, inputs: torch.Tensor) -> list[torch.Tensor]:
        """Return, for the active clients' batches ``inputs`` (clients x batch x ...), the global and previous
        models' representations and whether each client has a previous model."""
        active, batch = inputs.shape[:2]
        glob = representation(self.contrast.global_model, inputs.flatten(0, 1)).reshape(active, batch, -1)
        model = self.contrast.previous_model

        def previous_representation(params, client_inputs):
            with captured_representation(model) as kept:
                functional_call(model, params, (client_inputs,))
            return kept[-1]

        rows = {name: stack[:active] for name, stack in self.previous.items()}
        return [glob, vmap(previous_representation)(rows, inputs), self.has_previous[:active]]

    def client_sample_loss(self, inputs: torch.Tensor, outputs: torch.Tensor, extras: list[torch.Tensor]):
        """Return one client's ``mu * l_con`` per sample (zero without a previous model), inside the vmapped forward."""
        glob, previous, has_previous = extras
        return has_previous * self.contrast.loss(self._local[-1], glob, previous)


class Moon(Algorithm):
    """MOON (Li et al., CVPR 2021): FedAvg whose clients add the model-contrastive loss (`fedsim.algorithms.moon`).

    Each client's last trained model is its "previous model" in the next round it takes part in,
    held in `fedsim.algorithms.client_state.ClientStates` (parameters and BatchNorm statistics, for eval mode).
    """

    stateful_clients = True
    terms_need_client_core = True  # a loss on each sample's features
    vectorizable = True  # the contrasts stacked (ClientContrast.stacked), for a model without its own representation
    options = {"mu": Option(1.0, low=0.0, low_open=True, help="the contrastive loss's weight", setting="moon_mu"),
               "temperature": Option(0.5, low=0.0, low_open=True, help="the contrastive loss's temperature",
                                     setting="moon_temperature")}

    def __init__(self, config, model, global_state):
        super().__init__(config, model, global_state)
        if not hasattr(model, "representation"):
            representation_layer(model)  # a model with neither is refused before any round
        self.contrast = ModelContrast(model, mu=self.option("mu"), temperature=self.option("temperature"))
        self.client_states = ClientStates(global_state)

    def local_terms(self, client, global_state) -> ClientContrast | None:
        """Return the contrast against the global model and ``client``'s previous one (none the first time)."""
        return self.contrast.for_client(global_state, self.client_states.get(client))

    def after_client(self, client, global_state, trained, num_steps) -> None:
        """Keep ``client``'s trained model as its previous model."""
        self.client_states.put(client, trained)
