"""``minikafka console-consumer``: print a topic's records (``kafka-console-consumer.sh``).

Without ``--group`` the consumer is assigned every partition of the topic (no group is created);
with it, it subscribes as a member of that group and commits what it printed when it stops.
Output as Kafka's ``DefaultMessageFormatter``, through ``--property``: ``print.timestamp``,
``print.partition``, ``print.offset``, ``print.headers``, ``print.key``, ``print.value`` (true),
``key.separator`` (tab, between the fields), ``line.separator``, ``headers.separator`` (``,``),
``headers.key.separator`` (``:``) and ``null.literal`` (``null``).
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any, BinaryIO

import trio

from ..common import TopicPartition

if TYPE_CHECKING:
    from ..client.consumer import KafkaConsumer
    from ..client.consumer.consumer import ConsumerMessage
from .common import ToolError, add_bootstrap, client_properties, client_settings, parse_properties, set_main

TIMESTAMP_TYPES = {0: "CreateTime", 1: "LogAppendTime"}
PARTITIONS_WAIT_S = 10.0


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("console-consumer", help="print a topic's records (kafka-console-consumer.sh)")
    add_bootstrap(p)
    p.add_argument("--topic", required=True, help="the topic to consume")
    p.add_argument("--group", default=None, help="consume as a member of this group (commits what it printed)")
    p.add_argument("--from-beginning", action="store_true",
                   help="start at the earliest offset when there is no committed offset")
    p.add_argument("--partition", type=int, default=None, help="consume only this partition")
    p.add_argument("--offset", default=None, metavar="earliest|latest|N",
                   help="with --partition: where to start (default latest, earliest with --from-beginning)")
    p.add_argument("--max-messages", type=int, default=None, metavar="N", help="stop after N records")
    p.add_argument("--timeout-ms", type=int, default=None, metavar="MS",
                   help="stop when no record arrived for MS milliseconds")
    p.add_argument("--property", action="extend", nargs="+", default=[], metavar="KEY=VALUE",
                   help="formatter properties: print.key, print.headers, print.timestamp, print.partition, "
                        "print.offset, print.value, key.separator, line.separator, headers.separator, "
                        "headers.key.separator, null.literal")
    p.add_argument("--consumer-property", action="extend", nargs="+", default=[], metavar="KEY=VALUE",
                   help="a consumer setting by its Kafka name (fetch.min.bytes=1, ...)")
    p.add_argument("--consumer.config", dest="consumer_config", default=None, metavar="FILE",
                   help="consumer settings from a properties file")
    p.add_argument("--isolation-level", default=None, choices=("read_uncommitted", "read_committed"))
    set_main(p, main)


class MessageFormatter:
    """Kafka's ``DefaultMessageFormatter``: the selected fields of a record, then the line separator."""

    FLAGS = ("print.timestamp", "print.partition", "print.offset", "print.headers", "print.key", "print.value")

    def __init__(self, props: dict[str, str]) -> None:
        known = set(self.FLAGS) | {"key.separator", "line.separator", "headers.separator",
                                   "headers.key.separator", "null.literal"}
        unknown = set(props) - known
        if unknown:
            raise ToolError(f"unknown --property {', '.join(sorted(unknown))}")
        self.flags = {name: props.get(name, "true" if name == "print.value" else "false").strip().lower() == "true"
                      for name in self.FLAGS}
        self.separator = props.get("key.separator", "\t").encode()
        self.line_separator = props.get("line.separator", "\n").encode()
        self.headers_separator = props.get("headers.separator", ",").encode()
        self.header_key_separator = props.get("headers.key.separator", ":").encode()
        self.null = props.get("null.literal", "null").encode()

    def format(self, m: ConsumerMessage) -> bytes:
        fields: list[bytes] = []
        if self.flags["print.timestamp"]:
            kind = TIMESTAMP_TYPES.get(m.timestamp_type)
            fields.append(f"{kind}:{m.timestamp}".encode() if kind and m.timestamp >= 0 else b"NO_TIMESTAMP")
        if self.flags["print.partition"]:
            fields.append(f"Partition:{m.partition}".encode())
        if self.flags["print.offset"]:
            fields.append(f"Offset:{m.offset}".encode())
        if self.flags["print.headers"]:
            fields.append(self.headers_separator.join(
                k.encode() + self.header_key_separator + self._bytes(v) for k, v in m.headers) or b"NO_HEADERS")
        if self.flags["print.key"]:
            fields.append(self._bytes(m.key))
        if self.flags["print.value"]:
            fields.append(self._bytes(m.value))
        return self.separator.join(fields) + self.line_separator

    def _bytes(self, data: bytes | None) -> bytes:
        return self.null if data is None else bytes(data)


def consumer_settings(args: argparse.Namespace) -> dict[str, Any]:
    """The consumer's settings: the config file, then --consumer-property, then the dedicated options."""
    from ..client.consumer.config import ConsumerConfig

    props = client_properties(args.consumer_config, args.consumer_property, "--consumer-property")
    if args.isolation_level:
        props["isolation.level"] = args.isolation_level
    props["bootstrap.servers"] = args.bootstrap_server
    props.setdefault("client.id", "console-consumer")
    props["auto.offset.reset"] = "earliest" if args.from_beginning else props.get("auto.offset.reset", "latest")
    if args.group is not None:
        props["group.id"] = args.group
    return client_settings(ConsumerConfig, props, "consumer")


async def _partitions(consumer: KafkaConsumer, topic: str) -> list[int]:
    """The topic's partitions, waiting a little for a topic being created."""
    with trio.move_on_after(PARTITIONS_WAIT_S):
        while True:
            found = await consumer.partitions_for(topic)
            if found:
                return found
            await trio.sleep(0.2)
    raise ToolError(f"topic {topic!r} has no partitions (does it exist?)")


async def _start(consumer: KafkaConsumer, args: argparse.Namespace) -> None:
    """Subscribe with the group, or assign the partitions (and seek to --offset)."""
    if args.offset is not None and args.partition is None:
        raise ToolError("--offset needs --partition")
    if consumer.config.group_id is not None and args.partition is None:
        consumer.subscribe([args.topic])
        return
    partitions = await _partitions(consumer, args.topic)
    if args.partition is not None and args.partition not in partitions:
        raise ToolError(f"topic {args.topic!r} has no partition {args.partition}")
    tps = [TopicPartition(args.topic, p) for p in partitions if args.partition in (None, p)]
    consumer.assign(tps)
    if args.offset in ("earliest", "latest"):
        (consumer.seek_to_beginning if args.offset == "earliest" else consumer.seek_to_end)(*tps)
    elif args.offset is not None:
        try:
            consumer.seek(tps[0], int(args.offset))
        except ValueError:
            raise ToolError(f"--offset must be earliest, latest or a non-negative number, "
                            f"not {args.offset!r}") from None


async def main(args: argparse.Namespace) -> int:
    from ..client.consumer import KafkaConsumer

    if args.max_messages is not None and args.max_messages <= 0:
        raise ToolError("--max-messages must be positive")
    printer = RecordPrinter(MessageFormatter(parse_properties(args.property)), sys.stdout.buffer)
    async with KafkaConsumer(**consumer_settings(args)) as consumer:
        await _start(consumer, args)
        try:
            await printer.run(consumer, args.max_messages, args.timeout_ms)
        finally:
            print(f"Processed a total of {printer.printed} messages", file=sys.stderr)
    return 0


class RecordPrinter:
    """Polls a consumer and writes each record as the formatter says; ``printed`` counts them."""

    def __init__(self, formatter: MessageFormatter, out: BinaryIO) -> None:
        self.formatter = formatter
        self.out = out
        self.printed = 0

    async def run(self, consumer: KafkaConsumer, max_messages: int | None, timeout_ms: int | None) -> None:
        """Until ``max_messages`` records are printed, or none came for ``timeout_ms``."""
        from ..client.consumer.consumer import ConsumerMessage

        idle_since = trio.current_time()
        while max_messages is None or self.printed < max_messages:
            left = None if max_messages is None else max_messages - self.printed
            batch = await consumer.poll(timeout_ms=200, max_records=left)
            for tp, records in batch.items():
                for r in records:
                    self.out.write(self.formatter.format(ConsumerMessage(tp.topic, tp.partition, *r)))
                    self.printed += 1
            self.out.flush()
            now = trio.current_time()
            if batch:
                idle_since = now
            elif timeout_ms is not None and (now - idle_since) * 1000 >= timeout_ms:
                return
