"""Traffic capture: what the broker saw, request and response frames, in rolling block files.

:mod:`.format` (the file format and reader), :mod:`.reading` (captures and pcaps alike) and :mod:`.writer`
need no Trio;
:mod:`.service` is the broker's writer task; :mod:`.pcap` exports a capture as
a pcap that Wireshark/tshark decode as Kafka.
"""

from .format import CaptureRecord, ReadStats, capture_files, read_file
from .reading import read_capture

__all__ = ["CaptureRecord", "ReadStats", "capture_files", "read_capture", "read_file"]
