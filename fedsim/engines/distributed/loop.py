"""One rank's run: the same rounds as in-process, with rank 0 alone evaluating and writing the folder."""

from __future__ import annotations

import torch
import torch.distributed as dist

from ...build import RunSetup
from ...results.client_eval import Evaluation
from ...results.recorder import Recorder
from ...results.folder import RunFolder
from ...config.strategies import get_strategy
from ...results.outcome import RunResult
from ...rounds.drive import drive
from .collectives import broadcast_object
from .fedavg import DistributedFedAvgRounds
from .gradient import DistributedGradientRounds
from .launch import DEFAULT_TIMEOUT_S, check_world_size, start_process_group


def run(config, out=None, *, resume: bool = False, quiet: bool = True, timeout_s: float = DEFAULT_TIMEOUT_S) -> RunResult:
    """Run one strategy as this rank of a torchrun job; return its rows, summary and final model.

    Every rank loads the data, makes the partition and builds the seeded model itself (they are
    functions of the config), so nothing but gradients, models and a few counts travels. Rank 0
    writes ``out`` in the format of `fedsim.engines.inprocess.run`, through the same recorder,
    and a resumed run's state is sent from it to the others.

    Parameters
    ----------
    config : fedsim.config.RunConfig
    out : str or Path, optional
        Results folder, written by rank 0.
    resume : bool, default False
        Continue from ``out``'s checkpoint.
    quiet : bool, default True
        No progress bar (rank 0 draws it otherwise).
    timeout_s : float, default 600
        Seconds a collective waits for a peer before failing.
    """
    owns_group = not dist.is_initialized()
    ranks = start_process_group(config.device, timeout_s)
    try:
        check_world_size(config, ranks.world_size, in_rank=True)
        if ranks.leader and out is not None:
            RunFolder(out).check(resume=resume)
        setup = RunSetup.build(config, device=ranks.device)
        data, task, partition, model = setup.data, setup.task, setup.partition, setup.model
        local_training = get_strategy(config.strategy).local_training
        rounds_class = DistributedFedAvgRounds if local_training else DistributedGradientRounds
        rounds = rounds_class(config, model, data, task, partition, ranks)
        recorder = Recorder(config, partition, out if ranks.leader else None, multilabel=task.multilabel,
                            resume=resume and ranks.leader, quiet=quiet or not ranks.leader)
        restored, progress = broadcast_object((recorder.start(), recorder.progress))
        recorder.progress = progress
        if restored is not None:
            with torch.no_grad():
                torch._foreach_copy_(rounds.global_state, [t.to(ranks.device) for t in restored.global_state])
            rounds.load_state_dict(restored.engine_state)

        # the gradient strategies' global state is the model's own: nothing to load before evaluating
        state = rounds.global_state if local_training else None
        evaluation = Evaluation(model, data, task, partition, lambda: state, config) if ranks.leader else None
        summary = drive(recorder, rounds, evaluation)
        result = RunResult(recorder.rows, summary, [t.detach().clone() for t in rounds.global_state])
        # no rank tears its gloo connections down while another still uses them (rank 0 writes the
        # summary last): a peer's closed pair can abort the other rank as it exits
        dist.barrier()
        return result
    finally:
        if owns_group:
            dist.destroy_process_group()
