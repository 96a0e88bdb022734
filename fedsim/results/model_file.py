"""``model.pt``, a run's final global model, and `load_model`, which gives it back as a ready `torch.nn.Module`.

``model.pt`` is a ``torch.save`` file (tensors and plain data only, so ``torch.load(...,
weights_only=True)`` reads it) holding ``{"state": [Tensor, ...]}``: the model's parameters in
``model.parameters()`` order, then its floating-point buffers (BatchNorm's running statistics)
in ``model.buffers()`` order, on the CPU in the run's dtype (`fedsim.client.state_tensors`).
Integer buffers (BatchNorm's batch counter) are not saved: training never changes what they mean.
The architecture is not in the file but in the run's ``config.json``: `load_model` builds it
from there, as the run did, and loads the tensors into it.
"""

from __future__ import annotations

from pathlib import Path

import torch

from .folder import RunFolder


def load_model(folder, *, data=None) -> torch.nn.Module:
    """Return the final global model of the run in ``folder``, on the CPU, in eval mode.

    Parameters
    ----------
    folder : str or path-like
        A run's folder (``fedsim run --out``), or one strategy's folder of a comparison
        (``OUT/fedavg``).
    data : fedsim.data.Dataset, optional
        The run's dataset, for its classes, channels and image size; loaded from the run's
        config when not given.

    Raises
    ------
    ValueError
        If ``folder`` holds no finished run (a comparison's folder names its strategies).
    """
    from ..build import build_model
    from ..client.update import set_state
    from ..config.files import read_settings
    from ..config.run_config import RunConfig

    path = Path(folder)
    if not (path / "model.pt").is_file():
        strategies = sorted(child.name for child in path.iterdir() if (child / "model.pt").is_file()) \
            if path.is_dir() else []
        hint = f": it compares {', '.join(strategies)}; load one, e.g. {path / strategies[0]}" if strategies else \
            " (a run writes model.pt when it finishes)"
        raise ValueError(f"`folder`={str(path)!r} holds no finished run's model.pt{hint}")
    if not RunFolder(path).holds_run():
        raise ValueError(f"`folder`={str(path)!r} holds a model.pt but no fedsim run (its config.json is missing)")
    config = RunConfig.from_mapping(read_settings(path / "config.json"), source=str(path / "config.json"))
    config = config.replace(device="cpu")
    model = build_model(config, data or config.load_dataset())
    set_state(model, torch.load(path / "model.pt", map_location="cpu", weights_only=True)["state"])
    return model.eval()
