"""``minikafka perf-test producer|consumer``: throughput and latency (``kafka-producer-perf-test.sh``,
``kafka-consumer-perf-test.sh``).

A rich progress display on stderr shows the work while it runs (off when stderr is not a terminal
or with ``--no-progress``; Kafka's 5-second window lines are printed instead).
"""

from __future__ import annotations

import argparse

from .common import add_bootstrap, set_main
from .perf_consumer_processes import consumer_main
from .perf_processes import producer_main


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("perf-test", help="producer or consumer throughput and latency (kafka-*-perf-test.sh)")
    psub = p.add_subparsers(dest="perf_command", required=True)

    prod = psub.add_parser("producer", help="produce records as fast as asked (kafka-producer-perf-test.sh)")
    add_bootstrap(prod, required=False)
    prod.add_argument("--topic", required=True)
    prod.add_argument("--num-records", type=int, required=True, metavar="N", help="records to send")
    size = prod.add_mutually_exclusive_group()
    size.add_argument("--record-size", type=int, default=None, metavar="BYTES", help="size of each record value")
    size.add_argument("--payload-file", default=None, metavar="FILE",
                      help="values picked at random from this file's payloads (split by --payload-delimiter)")
    prod.add_argument("--payload-delimiter", default="\\n", help="payload separator in --payload-file (\\n)")
    prod.add_argument("--throughput", type=float, default=-1, metavar="RECORDS/S",
                      help="throttle to at most this many records/s (-1: unthrottled, the default)")
    prod.add_argument("--producer-props", action="extend", nargs="+", default=[], metavar="KEY=VALUE",
                      help="producer settings by their Kafka names (bootstrap.servers, acks, linger.ms, ...)")
    prod.add_argument("--producer.config", dest="producer_config", default=None, metavar="FILE",
                      help="producer settings from a properties file")
    prod.add_argument("--processes", type=int, default=1, metavar="N",
                      help="run N producers in worker processes, each sending its share of the records "
                           "(and of --throughput), with one merged summary (default 1: in this process)")
    prod.add_argument("--print-metrics", action="store_true", help="print the producer's metrics at the end")
    prod.add_argument("--no-progress", action="store_true", help="no progress display")
    set_main(prod, producer_main)

    cons = psub.add_parser("consumer", help="consume records as fast as possible (kafka-consumer-perf-test.sh)")
    add_bootstrap(cons)
    cons.add_argument("--topic", required=True)
    cons.add_argument("--messages", type=int, required=True, metavar="N", help="records to consume")
    cons.add_argument("--group", default=None, help="consumer group (default perf-consumer-<random>)")
    cons.add_argument("--fetch-size", type=int, default=None, metavar="BYTES", help="max.partition.fetch.bytes")
    cons.add_argument("--from-latest", action="store_true",
                      help="start at the latest offset when the group has none (default: earliest)")
    cons.add_argument("--timeout", type=int, default=10000, metavar="MS",
                      help="give up when no record arrived for this long (default 10000)")
    cons.add_argument("--reporting-interval", type=int, default=5000, metavar="MS",
                      help="interval of --show-detailed-stats lines (default 5000)")
    cons.add_argument("--show-detailed-stats", action="store_true", help="a line of figures per interval")
    cons.add_argument("--hide-header", action="store_true", help="leave out the header line")
    cons.add_argument("--consumer.config", dest="consumer_config", default=None, metavar="FILE",
                      help="consumer settings from a properties file")
    cons.add_argument("--processes", type=int, default=1, metavar="N",
                      help="run N consumers in worker processes, in one group, consuming --messages between them, "
                           "with one merged summary (default 1: in this process)")
    cons.add_argument("--disjoint-partitions", action="store_true",
                      help="with --processes: worker i takes the partitions p with p %% N == i itself (assign) "
                           "instead of joining the group")
    cons.add_argument("--print-metrics", action="store_true", help="print the consumer's metrics at the end")
    cons.add_argument("--no-progress", action="store_true", help="no progress display")
    set_main(cons, consumer_main)
