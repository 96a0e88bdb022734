"""The ClientApp of fedsim's Flower app: each message carries the run's settings; the node config, its partition."""

from fedsim.engines.flower import client_app

app = client_app()
