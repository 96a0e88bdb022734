"""FedAvg rounds whose clients train in parallel, in worker processes forked from the run's process.

``fedsim run --workers N`` trains a round's sampled clients N at a time: this process and N - 1
workers forked from it once the data, the partition and the model are built, so that they share
those pages and start without importing anything. As a DDP rank does
(`fedsim.engines.distributed.fedavg`), worker i trains the clients ``i, i + N, ...`` of the round
through the shared client core, with one torch thread each, and adds its scaled trained models
into a buffer of its own in shared memory; the global model is in shared memory too, so a round's
message to a worker is a list of (client, weight) pairs. The buffers are added in worker order,
so a result never depends on which worker finishes first; it differs from ``--workers 1`` only by
the order of a floating-point sum (the tests compare them in float64).

Fork starts the workers: the CPU only, and not for algorithms whose clients keep a state between
rounds, which would have to follow a client from worker to worker, nor for those whose
combination of the models is not a weighted sum that each worker can add its share of (what an
algorithm declares, `fedsim.algorithms.Algorithm`).
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os

import torch

from ...checks import SettingError
from ...interrupts import ignore_stop_signals
from ...results.progress import RoundStats
from ...support import check_runs_on
from .fedavg import InProcessFedAvgRounds

#: Seconds a worker has to exit once told to, before it is killed.
STOP_TIMEOUT_S = 5.0
#: Seconds between an idle worker's checks that the run's process is still there.
PARENT_CHECK_S = 1.0
#: The most workers `check_workers` accepts.
MAX_WORKERS = 256


def check_workers(workers, config) -> None:
    """Refuse a ``--workers`` count that is not a whole number in 1..256, or that ``config`` cannot use.

    More than one worker needs a strategy that trains locally (fedavg, fednova), whose clients
    keep no state between rounds, on the CPU (workers are forked processes): `fedsim.support`'s
    ``workers`` column.
    """
    if isinstance(workers, bool) or not isinstance(workers, int) or not 1 <= workers <= MAX_WORKERS:
        raise SettingError("{workers:name} must be a whole number in 1..{most:text}, got {got:text}",
                           most=MAX_WORKERS, got=repr(workers))
    if workers == 1:
        return
    check_runs_on(config, "workers", workers=workers)


@contextlib.contextmanager
def one_torch_thread():
    """Run the block with one intra-op thread (each worker has a core), then restore the count."""
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(previous)


class ParallelFedAvgRounds(InProcessFedAvgRounds):
    """`InProcessFedAvgRounds` with each round's clients shared out among this process and ``workers - 1`` forked ones.

    Parameters
    ----------
    config, model, data, task, partition
        As for `FedAvgRounds`.
    workers : int
        Processes that train clients, this one included (`check_workers`).

    The workers start with the first round and stop at `close`.
    """

    def __init__(self, config, model, data, task, partition, workers: int):
        check_workers(workers, config)
        super().__init__(config, model, data, task, partition)
        self.workers = workers
        self._pool: list[Worker] = []

    def train_round(self, round_index: int, samples_before: int = 0, target: int = 0) -> RoundStats:
        """Run round ``round_index`` as `FedAvgRounds` does, its clients trained in parallel."""
        with one_torch_thread():
            return super().train_round(round_index, samples_before, target)

    def served(self, round_index: int, assignments: list[tuple[int, float]]) -> list[tuple[int, float]]:
        """Send each worker its share of the round's (client, weight) pairs; return this process's share."""
        if not self._pool:
            self._start_pool()
        for index, worker in enumerate(self._pool, start=1):
            worker.send(round_index, assignments[index :: self.workers], self.clients_need())
        return assignments[:: self.workers]

    def combine(self, mean_delta: list[torch.Tensor], stats: RoundStats) -> None:
        """Add each worker's sums, in worker order, to this process's."""
        for worker in self._pool:
            samples, loss_sum, steps, sums, nonfinite = worker.receive()
            torch._foreach_add_(mean_delta, worker.buffer)
            if sums:
                torch._foreach_add_(self.round_sums(), sums)
            stats.add_client(samples, loss_sum, steps)
            stats.note_nonfinite(loss_sum, nonfinite)

    def close(self) -> None:
        """Stop the workers (told to exit, killed if they have not within `STOP_TIMEOUT_S`)."""
        pool, self._pool = self._pool, []
        for worker in pool:
            worker.stop()

    def _start_pool(self) -> None:
        for tensor in self.global_state:  # the workers read every round's global model from here
            tensor.share_memory_()
        context = multiprocessing.get_context("fork")
        for index in range(1, self.workers):
            self._pool.append(Worker(self, context, index))


class Worker:
    """One forked process that trains the clients it is sent, and the pipe and shared buffer to reach it."""

    def __init__(self, rounds: ParallelFedAvgRounds, context, index: int):
        self.index = index
        self.buffer = [torch.zeros_like(tensor).share_memory_() for tensor in rounds.global_state]
        self.connection, child_end = context.Pipe()
        self.process = context.Process(target=serve, args=(rounds, child_end, self.buffer, os.getpid()), daemon=True,
                                       name=f"fedsim-worker-{index}")
        self.process.start()
        child_end.close()
        self._round = None

    def send(self, round_index: int, assignments: list[tuple[int, float]], needed: dict) -> None:
        """Ask the worker to train ``assignments`` in round ``round_index``, with the server's state they need."""
        self._round = round_index + 1  # as metrics.csv numbers it
        self.connection.send((round_index, assignments, needed))

    def receive(self) -> tuple[int, float, int, list[torch.Tensor], str]:
        """Wait for the worker's round: samples, loss sum, steps, the algorithm's sums (its buffer is filled), and
        its first client whose loss was not finite (`fedsim.results.recorder.RoundStats.nonfinite`).
        """
        try:
            reply = self.connection.recv()
        except EOFError:
            self.process.join(STOP_TIMEOUT_S)
            raise RuntimeError(f"client worker {self.index} (pid {self.process.pid}) exited with status "
                               f"{self.process.exitcode} during round {self._round}") from None
        if isinstance(reply, str):
            raise RuntimeError(f"client worker {self.index} failed in round {self._round}: {reply}")
        return reply

    def stop(self) -> None:
        """Tell the worker to exit and wait for it; kill it if it does not."""
        with contextlib.suppress(OSError):
            self.connection.send(None)
        self.process.join(STOP_TIMEOUT_S)
        if self.process.is_alive():
            self.process.kill()
            self.process.join()
        self.connection.close()


def serve(rounds: ParallelFedAvgRounds, connection, buffer: list[torch.Tensor], run_pid: int) -> None:
    """A worker's loop: train the clients of each round it is sent into ``buffer``, until told to stop.

    Ctrl-C reaches every process of the terminal's group, and SIGTERM every process of a
    container or a systemd unit; the run's process handles them and stops the workers, so a
    worker ignores them.
    """
    ignore_stop_signals()
    torch.set_num_threads(1)
    while (message := _next_message(connection, run_pid)) is not None:
        round_index, assignments, needed = message
        try:
            rounds.take_what_clients_need(needed)
            torch._foreach_zero_(buffer)
            stats = RoundStats()
            rounds.begin_sums()
            rounds.train_clients(round_index, assignments, buffer, stats)
            sums = [tensor.clone() for tensor in rounds.round_sums()]
            connection.send((stats.samples, stats.loss_sum, stats.steps, sums, stats.nonfinite))
        except Exception as error:  # reported by the run's process, which stops
            connection.send(f"{type(error).__name__}: {error}")
            return


def _next_message(connection, run_pid: int):
    """Return the run's next message, or ``None`` once the run's process (``run_pid``) is gone.

    A run's process killed outright (SIGKILL) closes its end of the pipe, but forked siblings
    hold copies of it, so no end of file may come: an idle worker also checks its parent.
    """
    while not connection.poll(PARENT_CHECK_S):
        if os.getppid() != run_pid:
            return None
    try:
        return connection.recv()
    except EOFError:  # the run's process is gone
        return None
