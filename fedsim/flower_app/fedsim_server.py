"""The ServerApp of fedsim's Flower app: the run's settings come from Flower's run config."""

from fedsim.engines.flower import FederatedServer

app = FederatedServer().app
