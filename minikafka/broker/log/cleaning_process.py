"""A cleaning process: runs :func:`~.cleaner.run_cleaning_job` for the broker on another core.

Kafka's cleaner threads run beside the request handlers on other cores; a Python thread would share the
broker's GIL, so a log in a data dir is cleaned by a process of its own (one per ``log.cleaner.threads``),
started with ``python -m minikafka.broker.log.cleaning_process`` and fed jobs over its standard input: an
8-byte length, then the pickled :class:`~.cleaner.CleaningJob`; it answers on standard output with an
8-byte length and the pickled ``("ok", CleaningOutcome)`` or ``("error", text)``. It dies with the broker
(``PR_SET_PDEATHSIG``), so a killed broker leaves nothing writing ``.cleaned`` files.
"""

from __future__ import annotations

import ctypes
import logging
import os
import pickle
import signal
import struct
import subprocess
import sys
from typing import IO, Any

from .cleaner import CleaningJob, CleaningOutcome, run_cleaning_job

log = logging.getLogger(__name__)

_LENGTH = struct.Struct(">Q")


class CleaningProcessError(Exception):
    """The cleaning process failed a job or died."""


def _write_message(out: IO[bytes], obj: Any) -> None:
    data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    out.write(_LENGTH.pack(len(data)) + data)
    out.flush()


def _read_message(inp: IO[bytes]) -> Any:
    header = inp.read(_LENGTH.size)
    if len(header) < _LENGTH.size:
        raise EOFError("the other side closed the pipe")
    (n,) = _LENGTH.unpack(header)
    data = inp.read(n)
    if len(data) < n:
        raise EOFError("the other side closed the pipe mid-message")
    return pickle.loads(data)


class CleaningProcess:
    """The broker's handle on one cleaning process, started on first use; :meth:`run` blocks (call it
    from a worker thread)."""

    def __init__(self) -> None:
        self._proc: subprocess.Popen[bytes] | None = None

    def run(self, job: CleaningJob) -> CleaningOutcome:
        proc = self._proc
        if proc is None or proc.poll() is not None:
            proc = self._proc = subprocess.Popen(
                [sys.executable, "-m", __name__], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                env={**os.environ, "PYTHONUNBUFFERED": "1"})
        assert proc.stdin is not None and proc.stdout is not None
        try:
            _write_message(proc.stdin, job)
            status, result = _read_message(proc.stdout)
        except (OSError, EOFError) as exc:
            self.close()
            raise CleaningProcessError(f"the cleaning process died: {exc}") from None
        if status != "ok":
            raise CleaningProcessError(str(result))
        return result

    def close(self) -> None:
        proc, self._proc = self._proc, None
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait()
        if proc is not None:
            for pipe in (proc.stdin, proc.stdout):
                if pipe is not None:
                    pipe.close()


def _die_with_parent() -> None:
    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def main() -> None:
    """Serve cleaning jobs until standard input closes."""
    _die_with_parent()
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    inp, out = sys.stdin.buffer, sys.stdout.buffer
    while True:
        try:
            job = _read_message(inp)
        except EOFError:
            return
        try:
            reply: tuple[str, Any] = ("ok", run_cleaning_job(job))
        except Exception as exc:  # noqa: BLE001 - a failed job is reported to the broker, which logs it
            reply = ("error", f"{type(exc).__name__}: {exc}")
        _write_message(out, reply)


if __name__ == "__main__":
    main()
