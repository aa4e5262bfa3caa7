"""Kafka's command-line tools on minikafka's own clients, so they work against any Kafka broker.

``minikafka topics``, ``console-producer``, ``console-consumer``, ``consumer-groups``, ``configs``
and ``perf-test producer|consumer`` take the option names of the matching ``kafka-*.sh`` tool;
``faults add|list|clear`` manages fault rules over a minikafka broker's HTTP port;
``dump-log`` prints log segment files (``kafka-dump-log.sh``), reading the files, not a broker;
``acls`` adds, removes and lists ACLs (``kafka-acls.sh``);
``delegation-tokens`` creates, renews, expires and describes delegation tokens (``kafka-delegation-tokens.sh``);
``client-metrics`` manages KIP-714 client metrics subscriptions (``kafka-client-metrics.sh``).
``reassign-partitions`` moves partitions between brokers (``kafka-reassign-partitions.sh``).
``log-dirs --describe`` shows the brokers' log directories and what they hold (``kafka-log-dirs.sh``).
``leader-election`` runs preferred or unclean leader elections (``kafka-leader-election.sh``);
``metadata-quorum describe`` shows the KRaft metadata quorum (``kafka-metadata-quorum.sh``).
``cluster kill|stop|start|pause|resume`` fails the processes of a ``serve --brokers N --processes`` cluster.
Each module adds its subcommand with ``add_parser(sub)``, which sets ``run_tool`` (``run_tool(args) ->
exit status``) on the parsed arguments; :func:`add_parsers` adds them all.
"""

from __future__ import annotations

import argparse

from . import (acls, client_metrics, cluster, configs, console_consumer, console_producer, consumer_groups,
               delegation_tokens, dump_log, faults, leader_election, log_dirs, metadata_quorum, perf_test,
               reassign_partitions, topics)

TOOLS = (topics, console_producer, console_consumer, consumer_groups, configs, perf_test, faults, dump_log, acls,
         delegation_tokens, client_metrics, reassign_partitions, log_dirs, leader_election, metadata_quorum,
         cluster)


def add_parsers(sub: argparse._SubParsersAction) -> None:
    """Add every tool's subcommand to the ``minikafka`` parser."""
    for tool in TOOLS:
        tool.add_parser(sub)


__all__ = ["add_parsers", "TOOLS"]
