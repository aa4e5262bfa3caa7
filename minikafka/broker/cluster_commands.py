"""The commands ``minikafka serve --brokers N`` reads on stdin: brokers stopped, crashed, started, paused and
resumed, network partitions cut and healed, and the cluster's status.

::

    stop 1                      a controlled shutdown (leadership moved first)
    crash 1                     no shutdown: fenced when its session expires
    start 1
    pause 1 / resume 1          SIGSTOP / SIGCONT
    isolate 1 [for 10]          cut off from the other brokers, the controller and the clients
    partition 0 | 1 2 controller [for 10]    links cut between the sides (broker ids, controller, clients)
    heal [ID]                   one network partition, or all
    status
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .network_links import parse_node

if TYPE_CHECKING:
    from .cluster import Cluster

#: What an unknown or malformed command is answered with.
HELP = ("commands: stop ID (controlled shutdown) | crash ID (no shutdown: fenced when its session expires) | "
        "start ID | pause ID | resume ID | isolate ID [for SECONDS] | "
        "partition NODES | NODES ... [for SECONDS] (nodes: broker ids, controller, clients) | heal [ID] | status")


def _heal_after(words: list[str]) -> tuple[list[str], float | None]:
    """``words`` without a trailing ``for SECONDS``, and the seconds (ValueError: not a positive number)."""
    if len(words) >= 2 and words[-2] == "for":
        seconds = float(words[-1])
        if not seconds > 0:
            raise ValueError(f"not a positive number of seconds: {words[-1]}")
        return words[:-2], seconds
    return words, None


def status(cluster: Cluster) -> list[str]:
    """Every partition's leadership, each broker's state and the network partitions."""
    out = [f"{name}-{p.partition}: leader {p.leader} epoch {p.leader_epoch} replicas {p.replicas} isr {p.isr}"
           for name, topic in sorted(cluster.metadata.topics.items()) for p in topic.partitions]
    out.append(f"running brokers: {sorted(cluster.brokers)}")
    out.append("broker states: " + ", ".join(f"{b} {cluster.broker_state(b)}" for b in cluster.broker_ids))
    for part in cluster.links.partitions.values():
        sides = " | ".join(" ".join(str(n) for n in sorted(side, key=str)) for side in part.sides)
        out.append(f"network partition {part.id}: {sides}")
    return out


async def run_command(cluster: Cluster, line: str) -> list[str]:
    """Run one command line; returns what to print (the help line for anything else)."""
    words = line.split()
    if not words:
        return []
    verb, args = words[0], words[1:]
    try:
        args, heal_after = _heal_after(args)
        if verb == "status" and not args:
            return status(cluster)
        if verb == "heal" and len(args) <= 1 and heal_after is None:
            wanted = int(args[0]) if args else None
            if wanted is not None and wanted not in cluster.links.partitions:
                return [f"minikafka: no network partition {wanted}"]
            healed = cluster.heal_network(wanted)
            return [f"minikafka: healed network partition {p.id}" for p in healed] or ["minikafka: nothing to heal"]
        if verb == "partition":
            sides = [[parse_node(n) for n in side.split()] for side in " ".join(args).split("|")]
            part = cluster.partition_network(sides, heal_after)
            return [f"minikafka: network partition {part.id} cut" + (f" for {heal_after:g} s" if heal_after else "")]
        if len(args) != 1 or int(args[0]) not in cluster.configs:
            return [HELP]
        broker_id = int(args[0])
        if verb == "isolate":
            part = cluster.isolate_broker(broker_id, heal_after)
            return [f"minikafka: isolated broker {broker_id} (network partition {part.id})"]
        if heal_after is not None:
            return [HELP]
        if verb == "stop":
            await cluster.stop_broker(broker_id)
            return [f"minikafka: stopped broker {broker_id}"]
        if verb == "crash":
            await cluster.crash_broker(broker_id)
            return [f"minikafka: crashed broker {broker_id}"]
        if verb == "start":
            await cluster.start_broker(broker_id)
            return [f"minikafka: started broker {broker_id}"]
        if verb == "pause":
            cluster.pause_broker(broker_id)
            return [f"minikafka: paused broker {broker_id}"]
        if verb == "resume":
            cluster.resume_broker(broker_id)
            return [f"minikafka: resumed broker {broker_id}"]
    except KeyError as exc:  # a broker not running, a partition that is not there
        return [f"minikafka: {exc.args[0] if exc.args else exc}"]
    except ValueError as exc:
        return [f"minikafka: {exc}", HELP]
    return [HELP]
