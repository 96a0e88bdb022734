"""State a client keeps between the rounds it takes part in (SCAFFOLD's control variate, MOON's previous model).

The in-process engine simulates every client with one model object, so what a real client
would keep on its own disk is held here, one flat tensor per client:

- only for the clients that have trained at least once (a client never sampled costs nothing);
- on the CPU whatever the run's device (a GPU holds the model, not 1,000 copies of it);
- as one contiguous tensor, with none of the per-tensor overhead of a state dict.

The cost is ``clients seen x tensor elements x bytes per element``: for the 2NN (199,210
parameters) in float32, 0.8 MB per client, 0.8 GB for 1,000 clients; for the McMahan CNN
(1,663,370 parameters) 6.7 MB per client, 6.7 GB for 1,000.
"""

from __future__ import annotations

import torch


class ClientStates:
    """Per-client lists of tensors shaped like ``like``, stored flat on the CPU for the clients that have one.

    Parameters
    ----------
    like : list of Tensor
        The shapes, dtype and device that `get` returns (e.g. the global parameters).

    Examples
    --------
    >>> states = ClientStates([torch.zeros(2), torch.zeros(1, 1)])
    >>> states.get(3) is None
    True
    >>> states.put(3, [torch.tensor([1.0, 2.0]), torch.tensor([[3.0]])])
    >>> states.get(3)[1], states.nbytes
    (tensor([[3.]]), 12)
    """

    def __init__(self, like: list[torch.Tensor]):
        self.shapes = [tensor.shape for tensor in like]
        self.numels = [tensor.numel() for tensor in like]
        self.dtype, self.device = like[0].dtype, like[0].device
        self._flat: dict[int, torch.Tensor] = {}

    def __contains__(self, client: int) -> bool:
        return client in self._flat

    def __len__(self) -> int:
        return len(self._flat)

    @property
    def nbytes(self) -> int:
        """Bytes held now, over every client that has a state."""
        return sum(flat.numel() * flat.element_size() for flat in self._flat.values())

    def bytes_per_client(self) -> int:
        """Bytes one client's state takes."""
        return sum(self.numels) * torch.empty((), dtype=self.dtype).element_size()

    def get(self, client: int) -> list[torch.Tensor] | None:
        """Return ``client``'s tensors on the run's device (copies), or ``None`` if it has none yet."""
        flat = self._flat.get(client)
        if flat is None:
            return None
        pieces = flat.to(self.device).split(self.numels)
        return [piece.view(shape) for piece, shape in zip(pieces, self.shapes)]

    @torch.no_grad()
    def put(self, client: int, tensors: list[torch.Tensor]) -> None:
        """Store a copy of ``tensors`` as ``client``'s state."""
        if len(tensors) != len(self.shapes):
            raise ValueError(f"client {client}'s state has {len(tensors)} tensors, expected {len(self.shapes)}")
        flat = torch.cat([tensor.reshape(-1) for tensor in tensors]).to("cpu", self.dtype)
        self._flat[client] = flat

    def set(self, client: int, tensors: list[torch.Tensor] | None) -> None:
        """Store ``tensors`` as ``client``'s state, or forget its state when ``None``."""
        if tensors is None:
            self._flat.pop(client, None)
        else:
            self.put(client, tensors)

    def state_dict(self) -> dict:
        """Return every client's flat tensor, for a checkpoint."""
        return {"clients": dict(self._flat)}

    def load_state_dict(self, state: dict) -> None:
        """Restore `state_dict` output."""
        self._flat = {int(client): flat.clone() for client, flat in state["clients"].items()}
