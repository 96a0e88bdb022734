"""The client core: what one client (or one rank) does with the model, shared by every engine.

- `update`: local training and evaluation (`client_update`, `evaluate`, `predict`) and the model's
  state as one list of tensors (`state_tensors`, `get_state`, `set_state`);
- `training`: the local-training settings (`LocalTraining`) and one rank's weighted gradient for
  one step (`local_gradient`), with the batch, precision and seeding helpers they share;
- `optim`: the clients' optimizer settings (`OptimizerConfig`) and fedsim's `SGD`;
- `tasks`: what is learned and how it is scored (`SingleLabel`, `MultiLabel`, `create_task`).

It imports nothing of the rounds, engines, algorithms or results that run it.
"""

from .optim import SGD, OptimizerConfig
from .tasks import MultiLabel, SingleLabel, create_task, mean_average_precision
from .training import LocalGradient, LocalTraining, local_gradient
from .update import ClientUpdate, client_update, evaluate, get_state, predict, set_state, state_tensors

__all__ = ["ClientUpdate", "LocalGradient", "LocalTraining", "MultiLabel", "OptimizerConfig", "SGD", "SingleLabel",
           "client_update", "create_task", "evaluate", "get_state", "local_gradient", "mean_average_precision",
           "predict", "set_state", "state_tensors"]
