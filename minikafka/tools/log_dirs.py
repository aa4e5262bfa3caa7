"""``minikafka log-dirs``: the log directories of brokers and what they hold (``kafka-log-dirs.sh``).

``--describe`` asks each broker (``--broker-list``, default every broker) with DescribeLogDirs and prints
Kafka's output: two lines, then one line of JSON::

    Querying brokers for log directories information
    Received log directory information from brokers 0,1
    {"brokers":[{"broker":0,"logDirs":[{"logDir":"/data/d1","error":null,"partitions":[{"partition":"t-0",
    "size":1234,"offsetLag":0,"isFuture":false}]}]}],"version":1}

``--topic-list a,b`` keeps the partitions of those topics.  ``error`` is the Java exception class Kafka's
tool names (``org.apache.kafka.common.errors.KafkaStorageException`` for an offline directory).
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from .admin import AdminClient
from .common import ToolError, add_bootstrap, add_command_config, command_security, error_name, set_main


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("log-dirs", help="describe the log directories of brokers (kafka-log-dirs.sh)")
    add_bootstrap(p)
    add_command_config(p)
    p.add_argument("--describe", action="store_true", required=True,
                   help="describe the log directories on the brokers")
    p.add_argument("--topic-list", default="", metavar="T1,T2",
                   help="topics to show (default: every topic)")
    p.add_argument("--broker-list", default="", metavar="0,1,2",
                   help="brokers to query (default: every broker of the cluster)")
    set_main(p, main)


def exception_class(code: int) -> str | None:
    """The Java exception class Kafka's tool prints for a log dir's error code (None: no error)."""
    if not code:
        return None
    camel = "".join(word.capitalize() for word in error_name(code).split("_"))
    if camel.endswith("Error"):
        camel = camel[: -len("Error")]
    return f"org.apache.kafka.common.errors.{camel}Exception"


def log_dir_json(d: Any, topics: set[str]) -> dict[str, Any]:
    return {"logDir": d.log_dir, "error": exception_class(d.error_code),
            "partitions": [{"partition": f"{t.name}-{p.partition_index}", "size": p.partition_size,
                            "offsetLag": p.offset_lag, "isFuture": bool(p.is_future_key)}
                           for t in d.topics if not topics or t.name in topics for p in t.partitions]}


def _ids(text: str) -> list[int]:
    try:
        return sorted({int(x) for x in text.split(",") if x.strip()})
    except ValueError:
        raise ToolError(f"--broker-list expects broker ids like 0,1,2, got {text!r}") from None


async def main(args: argparse.Namespace) -> int:
    topics = {t.strip() for t in args.topic_list.split(",") if t.strip()}
    wanted = _ids(args.broker_list)
    async with AdminClient(args.bootstrap_server, client_id="log-dirs-tool",
                           security=command_security(args.command_config)) as admin:
        cluster = sorted((await admin.metadata([])).brokers)
        missing = [b for b in wanted if b not in cluster]
        if missing:
            raise ToolError(f"The given brokers do not exist from --broker-list: {','.join(map(str, missing))}. "
                            f"Current existent brokers: {','.join(map(str, cluster))}")
        brokers = wanted or cluster
        print("Querying brokers for log directories information")
        described = [(b, await admin.describe_log_dirs(b)) for b in brokers]
        print(f"Received log directory information from brokers {','.join(map(str, brokers))}")
        print(json.dumps({"brokers": [{"broker": b, "logDirs": [log_dir_json(d, topics) for d in dirs]}
                                      for b, dirs in described], "version": 1}, separators=(",", ":")))
    return 0
