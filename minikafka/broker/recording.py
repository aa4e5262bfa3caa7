"""What the broker knows of a traffic capture: an interface, implemented by :mod:`minikafka.capture`.

The broker never imports the capture: whoever starts it (``minikafka serve``, the test helpers of
:mod:`minikafka.testing`, the pytest plugin) hands it a :class:`CaptureSupport`
(:data:`minikafka.capture.recorder.CAPTURE`).  With one, the broker records its traffic into
``capture_dir`` from the start and its console starts and stops captures at run time; each capture is a
:class:`TrafficRecorder`, a request observer with a writer task the broker runs in its nursery.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path
from typing import Protocol

from ..common import Clock
from .request import RequestObserver


class TrafficRecorder(Protocol):
    """One broker's running capture: told of every request by :attr:`observer`, written by :meth:`run`."""

    @property
    def observer(self) -> RequestObserver: ...

    @property
    def directory(self) -> Path:
        """Where it writes."""

    @property
    def current_file(self) -> str | None:
        """The name of the file it writes now (None before the first)."""

    @property
    def captured(self) -> int:
        """Requests written so far."""

    @property
    def dropped(self) -> int:
        """Requests dropped (the writer too far behind)."""

    @property
    def pending_bytes(self) -> int:
        """Bytes handed over and not written yet."""

    def set_server(self, address: str) -> None:
        """The broker's ``host:port`` (recorded with every request)."""

    async def run(self) -> None:
        """The writer task: runs until cancelled, then writes what is left and closes the file."""


class CaptureSupport(Protocol):
    """Makes a broker's captures and reads their files (for the console)."""

    @property
    def file_pattern(self) -> re.Pattern[str]:
        """The names of capture files; group 1 is the broker id."""

    def recorder(self, directory: Path, broker_id: int, clock: Clock) -> TrafficRecorder:
        """A new capture of broker ``broker_id`` into ``directory``."""

    def export_pcap(self, paths: Iterable[Path], out: Path | str) -> None:
        """Capture files as one pcap file ``out``."""
