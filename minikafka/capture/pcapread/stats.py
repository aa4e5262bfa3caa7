"""The counts of one read: :class:`PcapStats`, what :func:`~.reader.read_pcap` met and could not decode."""

from __future__ import annotations

from dataclasses import dataclass, fields


@dataclass
class PcapStats:
    """What :func:`read_pcap` met: packets, connections, and what could not be decoded."""

    packets: int = 0
    bytes: int = 0
    tcp_packets: int = 0  # packets of the connections decoded
    other_packets: int = 0  # not TCP over IPv4/IPv6 (ARP, UDP, ICMP ...)
    other_ports: int = 0  # TCP packets of connections not on the Kafka ports
    other_shard: int = 0  # TCP packets of connections belonging to other shards
    unsupported_link: int = 0  # packets of link types this reader does not decode
    ip_fragments: int = 0  # dropped: no IP defragmentation
    truncated_packets: int = 0  # captured shorter than sent (snap length)
    late_packets: int = 0  # packets of connections already finished
    connections: int = 0
    non_kafka_connections: int = 0  # first frame not Kafka (TLS ...): ignored
    gaps: int = 0  # holes in TCP streams given up on
    gap_bytes: int = 0
    skipped_bytes: int = 0  # captured bytes thrown away (partial frames, resynchronisation)
    lost_frames: int = 0  # frames cut by a hole while in step
    resyncs: int = 0  # times a framer found its way back after losing step
    requests: int = 0
    responses: int = 0
    records: int = 0
    acks0_requests: int = 0  # Produce with acks=0: no response expected
    requests_without_response: int = 0
    responses_without_request: int = 0
    unknown_api_requests: int = 0  # api keys minikafka does not know (yielded all the same)

    def add(self, other: PcapStats) -> None:
        """Add ``other``'s counts to these."""
        for f in fields(self):
            setattr(self, f.name, getattr(self, f.name) + getattr(other, f.name))

    def summary(self) -> str:
        """The non-zero counts as one line."""
        return ", ".join(f"{f.name}={getattr(self, f.name)}" for f in fields(self) if getattr(self, f.name))
