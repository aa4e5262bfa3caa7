"""Traffic capture: what the broker saw, request and response frames, in rolling block files.

:mod:`.format` (the file format and reader), :mod:`.reading` (captures and pcaps alike) and :mod:`.writer`
need no Trio;
:mod:`.service` is the broker's writer task; :mod:`.pcap` exports a capture as
a pcap that Wireshark/tshark decode as Kafka.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .format import CaptureRecord, ReadStats, capture_files, read_file
    from .reading import read_capture

__all__ = ["CaptureRecord", "ReadStats", "capture_files", "read_capture", "read_file"]


def __getattr__(name: str) -> Any:
    """The names above, imported on first use: a broker handed :data:`.recorder.CAPTURE` loads no reader."""
    if name == "read_capture":
        from .reading import read_capture

        return read_capture
    if name in __all__:
        from . import format

        return getattr(format, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
