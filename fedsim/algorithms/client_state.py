"""State a client keeps between the rounds it takes part in (SCAFFOLD's control variate, MOON's previous model).

The in-process engine simulates every client with one model object, so what a real client
would keep on its own disk is held here, one flat tensor per client:

- only for the clients that have trained at least once (a client never sampled costs nothing);
- on the CPU whatever the run's device (a GPU holds the model, not 1,000 copies of it);
- as one contiguous tensor, with none of the per-tensor overhead of a state dict.

The cost is ``clients seen x tensor elements x bytes per element``: for the 2NN (199,210
parameters) in float32, 0.8 MB per client, 8 GB for 10,000 clients; for the McMahan CNN
(1,663,370 parameters) 6.7 MB per client. Above a memory budget (``--client-state-memory``)
the least recently used states spill to a file in the run folder, as pfl-research's
``DiskUserStateStorage`` keeps users' states on disk:

- the file is an append-only log of fixed-size rows, read and written with positional I/O
  (``pread``/``pwrite``) rather than mapped, so that the pages it passes through stay in the
  page cache and never in the process's resident memory;
- a state leaving memory is written by a thread of the log's while the next client trains (the
  write releases the GIL), and its slot is reused once the write is done; a read, a checkpoint
  and a resume wait for the writes before them, so what is read is always what was written;
- a checkpoint writes every state changed since the last one to the log and records the index
  (client -> row) and the log's length, never the states themselves; resuming cuts the log back
  to that length, so that what a killed run appended after its checkpoint is dropped and the
  resumed run sees exactly the checkpoint's states;
- when stale rows outnumber the live ones, a checkpoint writes the live rows to a new log
  (``NAME.GEN.bin``) and the log before the previous checkpoint's is removed.

The states in memory live in slots of a few large blocks (up to `SLAB_BYTES` each), reused as states
come and go, so that the memory they take is their count times their size: a state per
allocation would leave the allocator's heap fragmented by the many short-lived tensors of each
round, and the process holding more than the budget.
"""

from __future__ import annotations

import os
from collections import OrderedDict, deque
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import torch

#: The size of one block of state slots, in bytes (at least one state).
SLAB_BYTES = 64 * 2**20


class ClientStates:
    """Per-client lists of tensors shaped like ``like``, stored flat on the CPU (or spilled) for the clients that have one.

    Parameters
    ----------
    like : list of Tensor
        The shapes, dtype and device that `get` returns (e.g. the global parameters).

    Examples
    --------
    >>> states = ClientStates([torch.zeros(2), torch.zeros(1, 1)])
    >>> states.get(3) is None
    True
    >>> states.put(3, [torch.tensor([1.0, 2.0]), torch.tensor([[3.0]])])
    >>> states.get(3)[1], states.nbytes
    (tensor([[3.]]), 12)
    """

    def __init__(self, like: list[torch.Tensor]):
        self.shapes = [tensor.shape for tensor in like]
        self.numels = [tensor.numel() for tensor in like]
        self.dtype, self.device = like[0].dtype, like[0].device
        self._flat: OrderedDict[int, torch.Tensor] = OrderedDict()  # in memory (slots), least recently used first
        self._free: list[torch.Tensor] = []  # slots no client holds
        self._writing: deque[tuple[Future, torch.Tensor]] = deque()  # slots being written to the log, oldest first
        self._dirty: set[int] = set()  # in memory and newer than their row in the log, if any
        self._rows: dict[int, int] = {}  # client -> its latest row in the log
        self.budget: int | None = None
        self._log: SpillLog | None = None

    def spill_to(self, folder, name: str, budget_bytes: int) -> None:
        """Keep at most ``budget_bytes`` of states in memory; spill the others to ``folder/name.GEN.bin``."""
        self.budget = max(int(budget_bytes), self.bytes_per_client())  # one state at least, the one in use
        self._log = SpillLog(Path(folder), name, self.bytes_per_client(), self.dtype)

    def __contains__(self, client: int) -> bool:
        return client in self._flat or client in self._rows

    def __len__(self) -> int:
        return len(self._flat.keys() | self._rows.keys())

    @property
    def nbytes(self) -> int:
        """Bytes held in memory now, over the clients whose state is there."""
        return len(self._flat) * self.bytes_per_client()

    def bytes_per_client(self) -> int:
        """Bytes one client's state takes."""
        return sum(self.numels) * torch.empty((), dtype=self.dtype).element_size()

    def get(self, client: int, *, zeros: bool = False) -> list[torch.Tensor] | None:
        """Return ``client``'s tensors on the run's device (copies); for a client with none yet, ``None``, or
        zeros of the state's shapes with ``zeros``."""
        flat = self._flat.get(client)
        if flat is not None:
            self._flat.move_to_end(client)
        elif client in self._rows:
            flat = self._log.read(self._rows[client], into=self._take_slot(client))
            self._hold(client, flat, dirty=False)
        elif zeros:
            return [torch.zeros(shape, dtype=self.dtype, device=self.device) for shape in self.shapes]
        else:
            return None
        # a copy: the slot may take another client's state while the caller still holds this one
        pieces = flat.to(self.device, copy=True).split(self.numels)
        return [piece.view(shape) for piece, shape in zip(pieces, self.shapes)]

    @torch.no_grad()
    def put(self, client: int, tensors: list[torch.Tensor]) -> None:
        """Store a copy of ``tensors`` as ``client``'s state."""
        if len(tensors) != len(self.shapes):
            raise ValueError(f"client {client}'s state has {len(tensors)} tensors, expected {len(self.shapes)}")
        pieces = [tensor.reshape(-1).to("cpu", self.dtype) for tensor in tensors]
        self._hold(client, torch.cat(pieces, out=self._take_slot(client)), dirty=True)

    def set(self, client: int, tensors: list[torch.Tensor] | None) -> None:
        """Store ``tensors`` as ``client``'s state, or forget its state when ``None``."""
        if tensors is None:
            self._drop(client)
            self._dirty.discard(client)
            self._rows.pop(client, None)
        else:
            self.put(client, tensors)

    def _take_slot(self, client: int) -> torch.Tensor:
        """Return the slot ``client``'s state goes in: its own, or a free one."""
        slot = self._flat.pop(client, None)
        return self._slot() if slot is None else slot

    def _keep(self, client: int, flat: torch.Tensor, *, dirty: bool) -> None:
        """Hold a copy of ``flat`` in memory as ``client``'s state (`_hold`)."""
        self._hold(client, self._take_slot(client).copy_(flat), dirty=dirty)

    def _hold(self, client: int, slot: torch.Tensor, *, dirty: bool) -> None:
        """Hold ``slot`` as ``client``'s state, spilling the least recently used beyond the budget."""
        self._flat[client] = slot
        if dirty:
            self._dirty.add(client)
        if self.budget is None:
            return
        while self.nbytes > self.budget:
            oldest = next(iter(self._flat))
            self._spill(oldest)

    def _slot(self) -> torch.Tensor:
        """Return a free slot for one state, adding a block of them when none is free.

        Blocks double with the states held (1, 1, 2, 4... slots) up to `SLAB_BYTES`, so that a
        process holding one client's state (a Flower node) takes one slot. Under a budget, the
        slots held and being written are at most the budget's states and one more (a state coming
        in): past that, a slot comes from the oldest write, waited for.
        """
        self._reclaim(wait=False)
        if not self._free:
            count = max(1, min(SLAB_BYTES // self.bytes_per_client(), len(self._flat)))
            if self.budget is not None:
                count = min(count, self.budget // self.bytes_per_client() + 1 - len(self._flat) - len(self._writing))
            if count > 0:
                self._free = list(torch.empty(count, sum(self.numels), dtype=self.dtype).unbind())
            else:
                self._reclaim(wait=True, oldest_only=True)
        return self._free.pop()

    def _reclaim(self, *, wait: bool, oldest_only: bool = False) -> None:
        """Free the slots whose writes are done (with ``wait``, waiting for the oldest, or for all)."""
        while self._writing and (wait or self._writing[0][0].done()):
            future, slot = self._writing.popleft()
            future.result()  # a failed write (a full disk) is raised here, before anything relies on its row
            self._free.append(slot)
            if oldest_only:
                return

    def _drop(self, client: int) -> torch.Tensor | None:
        """Forget ``client``'s state in memory, freeing its slot; return the slot (valid until it is reused)."""
        slot = self._flat.pop(client, None)
        if slot is not None:
            self._free.append(slot)
        return slot

    def flush(self) -> None:
        """Wait until every state that left memory is in the log (its writes go on in the log's thread)."""
        if self._log is not None:
            self._log.wait()
        self._reclaim(wait=True)

    def _spill(self, client: int) -> None:
        if client not in self._dirty:  # the log has it already
            self._drop(client)
            return
        slot = self._flat.pop(client)
        self._rows[client], written = self._log.append(slot)
        self._writing.append((written, slot))  # the slot is reused once the write is done
        self._dirty.discard(client)

    def state_dict(self) -> dict:
        """Return what a checkpoint needs: every state in memory, or, once states have spilled, the log's index.

        With a log, the states changed since the last checkpoint are written to it first, so that
        the checkpoint is the index alone.
        """
        if self._log is None or not self._log.used:
            return {"clients": {client: slot.clone() for client, slot in self._flat.items()}}
        for client in list(self._dirty):
            self._rows[client], _ = self._log.append(self._flat[client])
        self._dirty.clear()
        self._rows = self._log.compact(self._rows)  # after every write
        self._reclaim(wait=True)
        return {"clients": {}, "spilled": {"file": self._log.path.name, "rows": self._log.rows,
                                           "index": dict(self._rows)}}

    def load_state_dict(self, state: dict) -> None:
        """Restore `state_dict` output (a log cut back to the checkpoint's length)."""
        for client in list(self._flat):
            self._drop(client)
        self.flush()
        self._dirty, self._rows = set(), {}
        spilled = state.get("spilled")
        if spilled is not None:
            if self._log is None:
                raise ValueError("this checkpoint's client states spilled to a file in its run folder; resume it "
                                 "in that folder")
            self._log.restore(spilled["file"], spilled["rows"])
            self._rows = {int(client): int(row) for client, row in spilled["index"].items()}
        for client, flat in state["clients"].items():  # beyond the budget, they spill as they come in
            self._keep(int(client), flat, dirty=True)


class SpillLog:
    """An append-only file of fixed-size rows: the states that left memory, each at the row it was written to.

    Parameters
    ----------
    folder : pathlib.Path
        Where the log lives (the run folder's ``client-states``).
    name : str
        The log's name; its generations are ``name.0.bin``, ``name.1.bin``...
    row_bytes : int
        Bytes of one state.
    dtype : torch.dtype
    """

    def __init__(self, folder: Path, name: str, row_bytes: int, dtype: torch.dtype):
        self.folder, self.name, self.row_bytes, self.dtype = folder, name, row_bytes, dtype
        self.generation, self.rows, self.used = 0, 0, False
        self._fd: int | None = None
        self._writer: ThreadPoolExecutor | None = None
        self._writes: deque[Future] = deque()
        self._previous: Path | None = None  # the log the previous checkpoint names, kept until the next one

    @property
    def path(self) -> Path:
        """The log's file for its current generation."""
        return self.folder / f"{self.name}.{self.generation}.bin"

    def _open(self) -> int:
        if self._fd is None:
            self.folder.mkdir(parents=True, exist_ok=True)
            self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        return self._fd

    def append(self, flat: torch.Tensor) -> tuple[int, Future]:
        """Write the contiguous ``flat`` as a new row, in the log's thread; return its row and the write's future.

        ``flat`` must not change until the write is done.
        """
        if self._writer is None:
            self._writer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="fedsim-client-states")
        self.used = True
        row, self.rows = self.rows, self.rows + 1
        written = self._writer.submit(self._write, self._open(), flat, row * self.row_bytes)
        self._writes.append(written)
        while self._writes and self._writes[0].done():
            self._writes.popleft().result()
        return row, written

    def _write(self, fd: int, flat: torch.Tensor, offset: int) -> None:
        if os.pwritev(fd, [memoryview(flat.numpy()).cast("B")], offset) != self.row_bytes:
            raise OSError(f"{self.path}: a client's state was written in part (is the disk full?)")

    def wait(self) -> None:
        """Wait for every write submitted; raise the first that failed."""
        while self._writes:
            self._writes.popleft().result()

    def read(self, row: int, into: torch.Tensor) -> torch.Tensor:
        """Read the state at ``row`` into the flat CPU tensor ``into``, after the writes before; return it."""
        self.wait()
        flat = into
        if os.preadv(self._open(), [memoryview(flat.numpy()).cast("B")], row * self.row_bytes) != self.row_bytes:
            raise RuntimeError(f"{self.path} ends before row {row}: the client-state log is damaged")
        return flat

    def compact(self, index: dict[int, int]) -> dict[int, int]:
        """Before a checkpoint: if stale rows outnumber the live ones, copy the live rows to a new log; return the index."""
        self.wait()
        os.fsync(self._open())
        if self.rows <= 2 * len(index):
            return index
        old_fd, old_path = self._fd, self.path
        self.generation, self.rows = self.generation + 1, 0
        # a log of this generation left by a run killed before its checkpoint is overwritten, never continued
        self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
        fresh = {}
        for client, row in sorted(index.items(), key=lambda item: item[1]):
            fresh[client] = self.rows
            os.pwrite(self._open(), os.pread(old_fd, self.row_bytes, row * self.row_bytes), self.rows * self.row_bytes)
            self.rows += 1
        os.fsync(self._open())
        os.close(old_fd)
        if self._previous is not None and self._previous != old_path:
            self._previous.unlink(missing_ok=True)  # no checkpoint names it any more
        self._previous = old_path
        return fresh

    def restore(self, file: str, rows: int) -> None:
        """Continue the log a checkpoint names, cut back to the ``rows`` it recorded."""
        self.wait()
        path = self.folder / file
        if not path.is_file() or path.stat().st_size < rows * self.row_bytes:
            raise ValueError(f"cannot resume: the client states this checkpoint needs are not all in {path}")
        self.generation = int(file.rsplit(".", 2)[1])
        if self._fd is not None:
            os.close(self._fd)
        self._fd, self.rows, self.used = None, rows, True
        os.truncate(path, rows * self.row_bytes)

    def close(self) -> None:
        """Finish the writes, stop the log's thread and close the log's file."""
        if self._writer is not None:
            self._writer.shutdown(wait=True)
            self._writer = None
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    __del__ = close

