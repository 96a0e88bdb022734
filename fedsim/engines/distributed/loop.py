"""One rank's run: the same rounds as in-process, with rank 0 alone evaluating and writing the folder."""

from __future__ import annotations

from functools import partial

import torch.distributed as dist

from ...interrupts import RunDiverged
from ...results.outcome import RunResult
from ...rounds.result import EngineRun, build_rounds
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
        rounds = partial(build_rounds, config, fedavg=partial(DistributedFedAvgRounds, ranks=ranks),
                         gradient=partial(DistributedGradientRounds, ranks=ranks))
        engine_run = EngineRun.build(config, out, resume=resume, rounds=rounds, leader=ranks.leader,
                                     device=ranks.device)
        engine_run.start(quiet=quiet, share=broadcast_object)  # every rank resumes from rank 0's checkpoint
        try:
            result = engine_run.drive()
        except RunDiverged:
            # every rank finds the divergence in the same round (the sums are all-reduced); rank 0 writes
            # the summary that says so, and no rank may exit first: torchrun stops the others at the
            # first rank's exit, and the launcher reads the summary to report the divergence
            dist.barrier()
            raise
        # no rank tears its gloo connections down while another still uses them (rank 0 writes the
        # summary last): a peer's closed pair can abort the other rank as it exits
        dist.barrier()
        return result
    finally:
        if owns_group:
            dist.destroy_process_group()
