"""FedBN (Li et al., "FedBN: Federated Learning on Non-IID Features via Local Batch Normalization", ICLR 2021).

BatchNorm stays local: each client keeps its own BatchNorm weights, biases and running statistics
between the rounds it takes part in (its state), trains from the global model with its own
BatchNorm in place, and the server averages every other parameter as FedAvg does. The server
never moves the BatchNorm of the global model by the clients' own; the central test, which has
no client, evaluates the global model with the mean of the BatchNorm of the clients of the
round. A client's first round starts from the global BatchNorm. With local test sets
(``--local-test-fraction``), each client's own model, the global one with its BatchNorm, is
evaluated on its local test set beside the global model. Run it with a model that has BatchNorm::

    fedsim run --strategy examples/algorithms/fedbn.py:FedBN --model cnn --norm batch ...
"""

import torch
from torch import nn

from fedsim.algorithms import Algorithm, ClientStates, LocalTerms


def batchnorm_positions(model):
    """Return the positions of BatchNorm's tensors in the exchanged state (parameters, then floating buffers)."""
    norms = {id(tensor) for module in model.modules() if isinstance(module, nn.modules.batchnorm._BatchNorm)
             for tensor in [*module.parameters(recurse=False), *module.buffers(recurse=False)]}
    state = [*model.parameters(), *(buffer for buffer in model.buffers() if buffer.is_floating_point())]
    return [index for index, tensor in enumerate(state) if id(tensor) in norms]


class OwnBatchNorm(LocalTerms):
    """Put the client's own BatchNorm in the model before it trains."""

    def __init__(self, own, positions):
        self.own, self.positions = own, positions

    def training(self, model):
        state = [*model.parameters(), *(buffer for buffer in model.buffers() if buffer.is_floating_point())]
        with torch.no_grad():
            torch._foreach_copy_([state[index] for index in self.positions], self.own)
        return super().training(model)


class FedBN(Algorithm):
    """FedAvg whose clients keep their BatchNorm layers local (their state)."""

    name = "fedbn"
    stateful_clients = True

    def __init__(self, config, model, global_state):
        super().__init__(config, model, global_state)
        self.positions = batchnorm_positions(model)
        if not self.positions:
            raise ValueError(f"`strategy`='fedbn' keeps BatchNorm local, but `model`={config.model!r} has none; "
                             "choose a model with BatchNorm (e.g. --model cnn --norm batch)")
        self.client_states = ClientStates([global_state[index] for index in self.positions])

    def local_terms(self, client, global_state):
        own = self.client_states.get(client)
        return None if own is None else OwnBatchNorm(own, self.positions)

    def after_client(self, client, global_state, trained, num_steps):
        self.client_states.put(client, [trained[index] for index in self.positions])

    def personal_model(self, client, global_state):
        own = self.client_states.get(client)
        if own is None:
            return None
        personal = list(global_state)
        for index, tensor in zip(self.positions, own):
            personal[index] = tensor
        return personal
