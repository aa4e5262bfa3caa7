"""``minikafka console-producer``: send the lines of stdin as records (``kafka-console-producer.sh``).

Line format as Kafka's ``LineMessageReader`` reads it, through ``--property``:
``parse.key=true`` with ``key.separator`` (default tab), ``parse.headers=true`` with
``headers.delimiter`` (tab; the headers come first), ``headers.separator`` (``,``) and
``headers.key.separator`` (``:``), ``null.marker`` (a key, value or header value equal to it is
sent as null) and ``ignore.error=true`` (a line without the separator is sent as the value).
"""

from __future__ import annotations

import argparse
import logging
import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, AsyncIterator, BinaryIO

import trio

if TYPE_CHECKING:
    from ..client.producer import RecordMetadata
from .common import ToolError, add_bootstrap, client_properties, client_settings, parse_properties, set_main

log = logging.getLogger(__name__)

CHUNK = 1 << 16
COMPRESSION_CODECS = ("none", "gzip", "snappy", "lz4", "zstd")


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("console-producer", help="send stdin lines as records (kafka-console-producer.sh)")
    add_bootstrap(p)
    p.add_argument("--topic", required=True, help="the topic to produce to")
    p.add_argument("--property", action="extend", nargs="+", default=[], metavar="KEY=VALUE",
                   help="line reader properties: parse.key, key.separator, parse.headers, headers.delimiter, "
                        "headers.separator, headers.key.separator, null.marker, ignore.error")
    p.add_argument("--producer-property", action="extend", nargs="+", default=[], metavar="KEY=VALUE",
                   help="a producer setting by its Kafka name (linger.ms=5, acks=1, ...)")
    p.add_argument("--producer.config", dest="producer_config", default=None, metavar="FILE",
                   help="producer settings from a properties file")
    p.add_argument("--request-required-acks", default=None, metavar="ACKS", help="acks: all, -1, 0 or 1")
    p.add_argument("--compression-codec", nargs="?", const="gzip", default=None, choices=COMPRESSION_CODECS,
                   help="compression.type (gzip when given without a value)")
    p.add_argument("--batch-size", type=int, default=None, help="batch.size in bytes")
    p.add_argument("--timeout", type=int, default=None, metavar="MS", help="linger.ms")
    p.add_argument("--sync", action="store_true", help="wait for each record's acknowledgement before the next")
    set_main(p, main)


@dataclass
class LineRecord:
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]]


def _text(line: bytes) -> str:
    return line.decode("utf-8", errors="replace")


class LineReader:
    """Kafka's ``LineMessageReader``: one line -> key, value and headers."""

    def __init__(self, props: dict[str, str]) -> None:
        unknown = set(props) - {"parse.key", "key.separator", "parse.headers", "headers.delimiter",
                                "headers.separator", "headers.key.separator", "null.marker", "ignore.error"}
        if unknown:
            raise ToolError(f"unknown --property {', '.join(sorted(unknown))}")

        def flag(name: str) -> bool:
            return props.get(name, "false").strip().lower() == "true"

        self.parse_key = flag("parse.key")
        self.parse_headers = flag("parse.headers")
        self.ignore_error = flag("ignore.error")
        self.key_separator = props.get("key.separator", "\t").encode()
        self.headers_delimiter = props.get("headers.delimiter", "\t").encode()
        self.headers_separator = props.get("headers.separator", ",").encode()
        self.header_key_separator = props.get("headers.key.separator", ":").encode()
        marker = props.get("null.marker")
        self.null_marker = marker.encode() if marker is not None else None
        if self.null_marker is not None and self.null_marker in (self.key_separator, self.headers_delimiter):
            raise ToolError("null.marker must differ from key.separator and headers.delimiter")

    def _null(self, data: bytes) -> bytes | None:
        return None if data == self.null_marker else data

    def parse(self, line: bytes, lineno: int) -> LineRecord:
        headers: list[tuple[str, bytes | None]] = []
        if self.parse_headers:
            head, sep, rest = line.partition(self.headers_delimiter)
            if sep:
                line = rest
                headers = [self._header(h) for h in head.split(self.headers_separator) if h]
            elif not self.ignore_error:
                raise ToolError(f"no headers delimiter found on line number {lineno}: {_text(line)!r}")
        key = None
        if self.parse_key:
            k, sep, v = line.partition(self.key_separator)
            if sep:
                key, line = self._null(k), v
            elif not self.ignore_error:
                raise ToolError(f"no key separator found on line number {lineno}: {_text(line)!r}")
        return LineRecord(key, self._null(line), headers)

    def _header(self, item: bytes) -> tuple[str, bytes | None]:
        k, sep, v = item.partition(self.header_key_separator)
        return _text(k), self._null(v) if sep else None


async def read_lines(stream: BinaryIO) -> AsyncIterator[bytes]:
    """The lines of a binary stream, read in a worker thread (without ``\\n`` or ``\\r\\n``)."""
    read = getattr(stream, "read1", stream.read)
    pending = b""
    while True:
        chunk = await trio.to_thread.run_sync(read, CHUNK, abandon_on_cancel=True)
        if not chunk:
            break
        *lines, pending = (pending + chunk).split(b"\n")
        for line in lines:
            yield line.removesuffix(b"\r")
    if pending:
        yield pending.removesuffix(b"\r")


def producer_settings(args: argparse.Namespace) -> dict[str, Any]:
    """The producer's settings: the config file, then --producer-property, then the dedicated options."""
    from ..client.producer import ProducerConfig

    props = client_properties(args.producer_config, args.producer_property, "--producer-property")
    for option, key in (("request_required_acks", "acks"), ("compression_codec", "compression.type"),
                        ("batch_size", "batch.size"), ("timeout", "linger.ms")):
        value = getattr(args, option)
        if value is not None:
            props[key] = str(value)
    props.setdefault("client.id", "console-producer")
    props["bootstrap.servers"] = args.bootstrap_server
    return client_settings(ProducerConfig, props, "producer")


async def main(args: argparse.Namespace) -> int:
    from ..client.producer import KafkaProducer

    reader = LineReader(parse_properties(args.property))
    stdin: BinaryIO = sys.stdin.buffer
    failures: list[BaseException] = []

    def on_ack(meta: RecordMetadata | None, exc: BaseException | None) -> None:
        if exc is not None:
            log.error("error when sending a record to topic %s: %s", args.topic, exc)
            failures.append(exc)

    sent = 0
    async with KafkaProducer(**producer_settings(args)) as producer:
        lineno = 0
        async for line in read_lines(stdin):
            lineno += 1
            rec = reader.parse(line, lineno)
            fut = await producer.send(args.topic, rec.value, key=rec.key, headers=rec.headers or None,
                                      callback=on_ack)
            sent += 1
            if args.sync:
                await fut.get()
        await producer.flush()
    if failures:
        raise ToolError(f"{len(failures)} of {sent} record(s) were not sent: {failures[0]}")
    return 0
