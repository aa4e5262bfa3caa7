"""Read Kafka traffic from tcpdump files (pcap or pcapng) as :class:`~.format.CaptureRecord` s.

:func:`read_pcap` streams through a capture file once: it decodes the link
layer (Ethernet with VLAN tags, Linux cooked SLL and SLL2 as ``tcpdump -i any``
writes them, raw IPv4/IPv6, BSD loopback/null), IPv4 and IPv6 (extension
headers skipped), and TCP; reassembles each direction of each TCP connection
with :class:`~.tcp.TcpStream`; splits the client's stream into request frames
and the server's into response frames (int32 size prefix); and pairs each
response with its request by correlation id.  A record is yielded once its
response arrived (or, for a request that gets none, when that is known:
acks=0 Produce at once, a request skipped by a later response, the end of the
connection or of the file), in the order the requests completed.  Memory is
bounded by the open connections' outstanding data (plus a bounded reorder
hold-back, see :class:`~.reader._Decoder`).

How the fields are filled: ``receive_ns`` is the time of the packet that
completed the request frame (when a broker could have read it), ``send_ns``
the time of the first packet of the response (when the broker began sending;
``receive_ns`` when there is no response), ``connection_id`` is
``"clientip:port-serverip:port"``, ``peer``/``server`` the two endpoints,
``broker_id`` -1 unless ``broker_ids`` maps the server ("ip:port" or port) to
one, ``principal`` "" (the wire does not tell), ``client_id`` from the request
header.

Which side is the server: the destination of a SYN if one is seen, else the
endpoint whose port is in ``ports`` (default {9092}; an empty set accepts every
TCP connection and takes the lower port as the server's when no SYN is seen).

Losses: a hole in a TCP stream (see :mod:`.tcp`) loses the frames it touches.
Inside a frame of known size the framer stays in step; otherwise it
resynchronises: on the request side it scans for a plausible request header
(size within limits, an api key minikafka knows, a version it supports, a
correlation id above the last one seen, a sane client id), on the response side
for a size followed by the correlation id of an outstanding request; a
candidate is accepted once its whole frame is there and parses.  A capture
that starts mid-connection is resynchronised the same way.  Everything lost
is counted in :class:`PcapStats`.

Limits: IP fragments are not reassembled (counted and dropped), TCP checksums
are not verified, TLS/SASL-encrypted traffic cannot be decoded (a connection
whose first frame is not Kafka is ignored), resynchronisation only finds
requests of api keys and versions minikafka knows, and pcapng Simple Packet
Blocks (no timestamp) get the previous packet's time.
"""

from .files import is_pcap_file, iter_packets
from .reader import connection_shard, read_pcap
from .stats import PcapStats

__all__ = ["PcapStats", "connection_shard", "is_pcap_file", "iter_packets", "read_pcap"]
