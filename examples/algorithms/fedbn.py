"""FedBN (Li et al., "FedBN: Federated Learning on Non-IID Features via Local Batch Normalization", ICLR 2021).

BatchNorm stays local: each client keeps its own BatchNorm weights, biases and running statistics
between the rounds it takes part in (its state), and from its second round on trains from the
global model with its own BatchNorm in place; the other parameters are averaged as FedAvg
averages them. A client's own model, the one the paper evaluates, is the global one with its
BatchNorm: with local test sets (``--local-test-fraction``) it is evaluated on the client's local
test set beside the global model.

The server also combines the clients' BatchNorm into the global model, as FedAvg combines every
tensor (the weights and biases take the server step, the running statistics the weighted mean of
the round's clients'), and no client with BatchNorm of its own trains with that combination. It
serves where the paper, whose clients all train from the first round, has no client's BatchNorm
to use: the central test, which has no client, evaluates the global model with it, and a client's
first round starts from it, where the paper's starts from the initial model's. Run it with a
model that has BatchNorm::

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
