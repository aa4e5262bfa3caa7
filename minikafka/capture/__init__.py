"""Traffic capture: what the broker saw, request and response frames, in rolling block files.

:mod:`.format` (the file format and reader) and :mod:`.writer` need no Trio;
:mod:`.service` is the broker's writer task; :mod:`.pcap` exports a capture as
a pcap that Wireshark/tshark decode as Kafka.
"""

from .format import CaptureRecord, ReadStats, capture_files, read_capture, read_file

__all__ = ["CaptureRecord", "ReadStats", "capture_files", "read_capture", "read_file"]
