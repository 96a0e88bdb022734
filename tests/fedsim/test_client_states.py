"""Clients' states beyond ``--client-state-memory`` spill to a log in the run folder; results and resumes are unchanged."""

import shutil
import time

import pytest
import torch

from fedsim.algorithms.client_state import ClientStates, SpillLog
from fedsim.config.run_config import RunConfig
from fedsim.engines.inprocess import run

from .numerics import EXACT


def test_states_beyond_the_budget_spill_and_come_back_unchanged(tmp_path):
    like = [torch.zeros(3), torch.zeros(2, 2)]
    states = ClientStates(like)
    states.spill_to(tmp_path, "controls", budget_bytes=2 * states.bytes_per_client())
    # client + 1: no state is all zeros, as an empty slot or an unwritten row of the log would be
    kept = {client: [torch.full((3,), client + 1.0), torch.full((2, 2), -client - 1.0)] for client in range(6)}
    for client, tensors in kept.items():
        states.put(client, tensors)
        assert states.nbytes <= 2 * states.bytes_per_client()
    states.flush()
    assert len(states) == 6 and (tmp_path / "controls.0.bin").stat().st_size == 4 * states.bytes_per_client()
    for client in (0, 5, 2, 0):  # from the log, and from memory
        assert all(torch.equal(a, b) for a, b in zip(states.get(client), kept[client])), client
    kept[0] = [torch.full((3,), 7.0), torch.full((2, 2), -7.0)]
    states.put(0, kept[0])  # a newer state supersedes the row in the log
    saved = states.state_dict()
    assert saved["clients"] == {} and set(saved["spilled"]["index"]) == set(range(6))
    restored = ClientStates(like)
    restored.spill_to(tmp_path, "controls", budget_bytes=2 * states.bytes_per_client())
    restored.load_state_dict(saved)
    for client in (4, 0, 1, 5, 2, 3):
        assert all(torch.equal(a, b) for a, b in zip(restored.get(client), kept[client])), client


def test_stale_rows_are_compacted_into_a_new_log_at_a_checkpoint(tmp_path):
    states = ClientStates([torch.zeros(4)])
    states.spill_to(tmp_path, "s", budget_bytes=states.bytes_per_client())
    for step in range(10):  # two clients take turns: every switch writes a row
        states.put(step % 2, [torch.full((4,), float(step))])
    states.state_dict()
    assert (tmp_path / "s.1.bin").stat().st_size == 2 * states.bytes_per_client()
    assert torch.equal(states.get(0)[0], torch.full((4,), 8.0)) and torch.equal(states.get(1)[0], torch.full((4,), 9.0))


# SCAFFOLD over 8 clients, half a round: every client's control variate is a state
SCAFFOLD = {"strategy": "scaffold", "dataset": "digits", "model": "mlp", "num_partitions": 8, "fraction": 0.5,
            "rounds": 4, "local_steps": 2, "batch_size": 20, "lr": 0.1, "dtype": "float64"}
TINY = 0.3  # MiB: one 2NN-on-digits control variate in float64 (0.2 MB) at a time


def log_sizes(folder):
    """The bytes of each client-state log in the run folder ``folder``, by file name."""
    return {log.name: log.stat().st_size for log in (folder / "client-states").glob("*.bin")}


@pytest.mark.numerics
def test_a_run_whose_states_spill_equals_one_that_holds_them_and_resumes_from_its_log(tmp_path):
    config = RunConfig(**SCAFFOLD)
    expected = run(config).global_state
    spilled = config.replace(client_state_memory=TINY)
    torch.testing.assert_close(run(spilled, tmp_path / "a").global_state, expected, rtol=0, atol=0)
    assert list((tmp_path / "a" / "client-states").glob("*.bin"))
    # a run killed after its round-2 checkpoint, whose log has grown since: resuming cuts the log back
    run(spilled.replace(rounds=2), tmp_path / "b")
    at_checkpoint = log_sizes(tmp_path / "b")
    longer = tmp_path / "longer"
    shutil.copytree(tmp_path / "b", longer)
    run(spilled.replace(rounds=3), longer, resume=True)  # appends round 3's states to the log
    for log in (longer / "client-states").glob("*.bin"):
        shutil.copy(log, tmp_path / "b" / "client-states" / log.name)
    assert log_sizes(tmp_path / "b").keys() == at_checkpoint.keys() and all(
        size > at_checkpoint[name] for name, size in log_sizes(tmp_path / "b").items())
    # the rows past the checkpoint's would be written over, the same again, so only the log's size shows the cut
    run(spilled.replace(rounds=2), tmp_path / "b", resume=True)  # no round left: the resume alone
    assert log_sizes(tmp_path / "b") == at_checkpoint
    resumed = run(spilled, tmp_path / "b", resume=True)
    torch.testing.assert_close(resumed.global_state, expected, **EXACT)
    assert log_sizes(tmp_path / "b") == log_sizes(tmp_path / "a")
    # the budget changes no result, so a resume may change it
    run(config.replace(rounds=2), tmp_path / "c")
    torch.testing.assert_close(run(spilled, tmp_path / "c", resume=True).global_state, expected, **EXACT)


def test_a_slot_is_reused_only_once_its_state_is_in_the_log(tmp_path, monkeypatch):
    """Writes slowed to a crawl: a slot taken back before its write ended would put another state in that row."""
    write = SpillLog._write

    def slow_write(self, fd, flat, offset):
        time.sleep(0.02)
        write(self, fd, flat, offset)

    monkeypatch.setattr(SpillLog, "_write", slow_write)
    states = ClientStates([torch.zeros(5)])
    states.spill_to(tmp_path, "slow", budget_bytes=2 * states.bytes_per_client())
    for client in range(8):  # client + 1: a slot or a row left empty (zeros) holds no client's state
        states.put(client, [torch.full((5,), client + 1.0)])
    for client in (7, 0, 3, 6, 1, 5, 2, 4):
        assert torch.equal(states.get(client)[0], torch.full((5,), client + 1.0)), client
