"""`memprof run --gather`: each rank's report handed to rank 0 through the job's own store, so that
rank 0's node has every rank's report with no shared filesystem. The store is torchrun's: its
agent on the first node serves a TCPStore at MASTER_ADDR:MASTER_PORT for the workers
(TORCHELASTIC_USE_AGENT_STORE=True, both the c10d and the static rendezvous), and keeps serving it
until every node's agent has finished, so a rank may hand over its report after rank 0's program
ended or before it began waiting. memprof connects as one more client, under keys of its own
(the run id and restart count in them); it issues no collective and touches no process group of
the program. Rank 0 takes each report as it arrives (and deletes its key), so what arrived is kept
even if the job is torn down while it waits."""
import os
import time
from datetime import timedelta

# How long a rank waits to connect to the store, and between looks for reports.
CONNECT_SECONDS = 60
POLL_SECONDS = 0.1


class NoStore(Exception):
    """There is no torchrun store to reach (why, for the user)."""


def where():
    """The store's address, or NoStore saying why there is none."""
    if os.environ.get("TORCHELASTIC_USE_AGENT_STORE") != "True":
        raise NoStore(
            "--gather hands reports over torchrun's store, and this rank was not started by "
            "torchrun with its agent's store (TORCHELASTIC_USE_AGENT_STORE is not True)"
        )
    try:
        return os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"])
    except (KeyError, ValueError):
        raise NoStore("MASTER_ADDR and MASTER_PORT do not name torchrun's store") from None


def _key(rank):
    run = os.environ.get("TORCHELASTIC_RUN_ID", "none")
    attempt = os.environ.get("TORCHELASTIC_RESTART_COUNT", "0")
    return f"memprof/gather/{run}/{attempt}/rank{rank}"


def _connect(wait_seconds):
    addr, port = where()
    from torch.distributed import TCPStore

    return TCPStore(addr, port, is_master=False, timeout=timedelta(seconds=wait_seconds))


def hand_over(rank, header, payload):
    """Puts this rank's report (`header`, a line of JSON, and the report's bytes) in the store."""
    store = _connect(CONNECT_SECONDS)
    store.set(_key(rank), header.encode() + b"\n" + payload)


def collect(ranks, seconds, take):
    """Waits up to `seconds` for the reports of `ranks`, calling take(rank, header, payload) for
    each as it arrives; returns the ranks that never handed one over."""
    store = _connect(CONNECT_SECONDS)
    pending = list(ranks)
    deadline = time.monotonic() + seconds
    while pending:
        arrived = [r for r in pending if store.check([_key(r)])]
        for r in arrived:
            value = store.get(_key(r))
            store.delete_key(_key(r))
            header, _, payload = value.partition(b"\n")
            take(r, header.decode(), payload)
            pending.remove(r)
        if pending and not arrived:
            if time.monotonic() >= deadline:
                break
            time.sleep(POLL_SECONDS)
    return pending
