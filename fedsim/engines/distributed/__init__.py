"""The torch.distributed engine: one process per rank under torchrun, real DDP, FedAvg over ranks.

Start it with ``torchrun --nproc_per_node=N -m fedsim ddp ...`` (or any launcher that sets
``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``, ``MASTER_ADDR`` and ``MASTER_PORT``), or with
``fedsim ddp --nproc N ...``, which starts torchrun on 127.0.0.1 itself. The names in ``__all__``
are its public surface; its modules are internal.
"""

from .launch import launch, under_torchrun
from .loop import run

__all__ = ["launch", "run", "under_torchrun"]
