"""Reading a capture: minikafka's own capture files and tcpdump pcap/pcapng files alike."""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator

from .format import CaptureRecord, ReadStats, capture_files, read_file
from .pcapread import is_pcap_file, read_pcap


def read_capture(paths: Iterable[str | os.PathLike], stats: ReadStats | None = None,
                 ports: Iterable[int] | None = None, pcap_stats=None) -> Iterator[CaptureRecord]:
    """Every record of the capture files or directories given, file by file.

    A tcpdump file (pcap or pcapng, told by its magic number) is decoded with
    :func:`~.pcapread.read_pcap` (``ports``: the Kafka ports, default 9092;
    ``pcap_stats``: a :class:`~.pcapread.PcapStats` to fill in); its records
    count in ``stats.records``.
    """
    for path in capture_files(paths):
        if is_pcap_file(path):
            for r in read_pcap(path, ports=ports, stats=pcap_stats):
                if stats is not None:
                    stats.records += 1
                yield r
        else:
            yield from read_file(path, stats)
