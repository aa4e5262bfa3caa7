"""Console API: transactions and producers.

``GET /console/api/transactions``: what ``kafka-transactions list`` / ``describe`` and
``describe-producers`` show, read from the transaction coordinator (each transactional id the caller
may DESCRIBE: state, producer id and epoch, timeout, start time, the partitions of its open transaction)
and from the producer state of the partitions this cluster leads (DescribeProducers: producer id,
epoch, last sequence, last timestamp, coordinator epoch, the open transaction's first offset), of the
topics the caller may READ (as DescribeProducers checks).
"""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.routing import BaseRoute, Route

from ..security.acl import AclOperation, ResourceType
from .context import ConsoleContext, api
from .state import any_broker


def routes(ctx: ConsoleContext) -> list[BaseRoute]:

    async def transactions(request: Request) -> Any:
        broker = any_broker(ctx.target)
        coordinator = broker.txn_coordinator
        now = coordinator.now_ms()
        txns = []
        for meta in sorted(coordinator.txns.values(), key=lambda m: m.transactional_id):
            if not ctx.allowed(request, AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, meta.transactional_id):
                continue
            partitions = sorted([tp.topic, tp.partition] for tp in meta.partitions
                                if ctx.allowed(request, AclOperation.DESCRIBE, ResourceType.TOPIC, tp.topic))
            txns.append({"transactional_id": meta.transactional_id, "state": meta.state.value,
                         "producer_id": meta.producer_id, "producer_epoch": meta.producer_epoch,
                         "timeout_ms": meta.timeout_ms, "start_ms": meta.start_ms,
                         "last_update_ms": meta.last_update_ms, "partitions": partitions,
                         "groups": sorted(meta.groups),
                         "duration_ms": now - meta.start_ms if meta.state.value == "Ongoing" and meta.start_ms >= 0
                         else None})
        producers = []
        readable: dict[str, bool] = {}
        for broker_id, b in sorted(ctx.target.brokers().items()):
            for (topic, index), part in sorted(b.replica_manager.partitions.items()):
                if not part.is_leader or not part.producers.producers:
                    continue
                if topic not in readable:
                    readable[topic] = ctx.allowed(request, AclOperation.READ, ResourceType.TOPIC, topic)
                if not readable[topic]:
                    continue
                for pid, entry in sorted(part.producers.producers.items()):
                    producers.append({"topic": topic, "partition": index, "leader": broker_id, "producer_id": pid,
                                      "producer_epoch": entry.epoch, "last_sequence": entry.last_seq,
                                      "last_timestamp": entry.last_timestamp,
                                      "coordinator_epoch": entry.coordinator_epoch,
                                      "current_txn_start_offset": entry.current_txn_first_offset})
        return {"now_ms": now, "transactions": txns, "producers": producers}

    return [Route("/console/api/transactions", api(ctx, transactions), methods=["GET"])]
