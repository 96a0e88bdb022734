"""Where client work runs: `fedsim.engines.inprocess` simulates every rank or client in one process."""

__all__: list[str] = []
