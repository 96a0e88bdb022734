"""fedsim: how a classifier behaves when its data is split unevenly, and which aggregation copes best.

The names a user starts from are here: `RunConfig` (a run's settings), `run` (one strategy in
this process), `compare` (several on one partition), `read_rows` (a results file), `load_model`
(a run's final model) and the algorithm API (`Algorithm`, `LocalTerms`, `Option`, and the
declared state `ServerState`, `RoundSum`, `ClientStates`); they are
imported when first used, so that importing `fedsim` itself stays cheap (no torch). The rest is
in the subpackages: `fedsim.data`, `fedsim.models`, `fedsim.client` (the client core: local
training, the optimizers, the tasks), `fedsim.algorithms`, `fedsim.rounds` (what a round is),
`fedsim.engines` (where it runs), `fedsim.flower` (fedsim's methods in a Flower user's own app),
`fedsim.comm`, `fedsim.results`, `fedsim.config`, and the command line in `fedsim.cli`.
"""

import importlib

__version__ = "0.1.0"

#: The public names and the modules that define them, imported on first use.
_PUBLIC = {
    "RunConfig": "fedsim.config.run_config",
    "run": "fedsim.engines.inprocess.loop",
    "compare": "fedsim.comparison",
    "read_rows": "fedsim.results.folder",
    "load_model": "fedsim.results.model_file",
    "Algorithm": "fedsim.algorithms.base",
    "LocalTerms": "fedsim.algorithms.base",
    "Option": "fedsim.algorithms.base",
    "ServerState": "fedsim.algorithms.declared",
    "RoundSum": "fedsim.algorithms.declared",
    "ClientStates": "fedsim.algorithms.client_state",
}

__all__ = ["__version__", *_PUBLIC]


def __getattr__(name):
    if name in _PUBLIC:
        return getattr(importlib.import_module(_PUBLIC[name]), name)
    raise AttributeError(f"module 'fedsim' has no attribute {name!r}")
