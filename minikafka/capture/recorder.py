"""The capture as the broker sees it: :data:`CAPTURE` implements the broker's
:class:`~minikafka.broker.recording.CaptureSupport`, and is handed to a broker or cluster by whoever starts it
(``minikafka serve``, :mod:`minikafka.testing`, the pytest plugin): the broker never imports the capture.

Importing this module costs next to nothing: the capture's writer, observer and file format are imported when
a capture starts, so a broker that never captures never loads them."""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from ..broker.recording import CaptureSupport, TrafficRecorder
from ..common import Clock

if TYPE_CHECKING:
    from .observer import CaptureObserver
    from .writer import CaptureFileWriter


class CaptureRecorder:
    """One broker's capture: a :class:`CaptureService` (the writer) behind a :class:`CaptureObserver`."""

    def __init__(self, directory: Path, broker_id: int, clock: Clock) -> None:
        from .observer import CaptureObserver
        from .service import CaptureService

        self.service = CaptureService(directory, broker_id, clock=clock)
        self._observer = CaptureObserver(self.service)

    @property
    def observer(self) -> CaptureObserver:
        return self._observer

    @property
    def writer(self) -> CaptureFileWriter:
        """The service's file writer."""
        return self.service.writer

    @property
    def directory(self) -> Path:
        return self.service.writer.dir

    @property
    def current_file(self) -> str | None:
        files = self.service.writer.files
        return files[-1].name if files else None

    @property
    def captured(self) -> int:
        return self.service.captured

    @property
    def dropped(self) -> int:
        return self.service.dropped

    @property
    def pending_bytes(self) -> int:
        return self.service.pending_bytes

    def set_server(self, address: str) -> None:
        self.service.server = address

    async def run(self) -> None:
        await self.service.run()


class Capture:
    """minikafka's capture files, for a broker (:class:`~minikafka.broker.recording.CaptureSupport`)."""

    @property
    def file_pattern(self) -> re.Pattern[str]:
        from .format import FILE_RE

        return FILE_RE

    def recorder(self, directory: Path, broker_id: int, clock: Clock) -> TrafficRecorder:
        return CaptureRecorder(directory, broker_id, clock)

    def export_pcap(self, paths: Iterable[Path], out: Path | str) -> None:
        from .pcap import export_pcap

        export_pcap(list(paths), out)


#: What a broker is given to capture its traffic.
CAPTURE: CaptureSupport = Capture()
