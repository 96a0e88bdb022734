"""The Flower engine: fedsim's clients, partitions and strategies as a Flower app.

`simulate` runs it on Flower's simulation engine; `client_app` and `FederatedServer` are its
``ClientApp`` and ``ServerApp``. The names in ``__all__`` are its public surface; its modules
are internal.
"""

from .client_app import client_app
from .server_app import FederatedServer, check_flower_config
from .simulation import simulate

__all__ = ["FederatedServer", "check_flower_config", "client_app", "simulate"]
