"""fedsim's Flower app folder, for `flwr run` (see pyproject.toml)."""
