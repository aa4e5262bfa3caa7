"""Kafka's command-line tools on minikafka's own clients, so they work against any Kafka broker.

``minikafka topics``, ``console-producer``, ``console-consumer``, ``consumer-groups``, ``configs``
and ``perf-test producer|consumer`` take the option names of the matching ``kafka-*.sh`` tool;
``faults add|list|clear`` manages fault rules over a minikafka broker's HTTP port;
``dump-log`` prints log segment files (``kafka-dump-log.sh``), reading the files, not a broker.
Each module adds its subcommand with ``add_parser(sub)``, which sets ``run_tool`` (``run_tool(args) ->
exit status``) on the parsed arguments; :func:`add_parsers` adds them all.
"""

from __future__ import annotations

import argparse

from . import configs, console_consumer, console_producer, consumer_groups, dump_log, faults, perf_test, topics

TOOLS = (topics, console_producer, console_consumer, consumer_groups, configs, perf_test, faults, dump_log)


def add_parsers(sub: argparse._SubParsersAction) -> None:
    """Add every tool's subcommand to the ``minikafka`` parser."""
    for tool in TOOLS:
        tool.add_parser(sub)


__all__ = ["add_parsers", "TOOLS"]
