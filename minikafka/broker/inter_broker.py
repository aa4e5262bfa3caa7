"""Requests one broker sends another (Kafka's ``NodeToNodeChannelManager`` / ``InterBrokerSendThread``).

One connection per target broker, opened on first use, one request at a time
on it (a lock per target), reopened after any error.  Used by the transaction
marker channel (WriteTxnMarkers) and by the produce path's KIP-890
verification (AddPartitionsToTxn with ``verify_only``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import trio

from ..client.connection import KafkaConnection
from ..common import Node

log = logging.getLogger(__name__)

#: What a failed inter-broker request raises: the target is down, went away, or is too slow.
CHANNEL_ERRORS = (OSError, ConnectionError, trio.BrokenResourceError, trio.ClosedResourceError, trio.TooSlowError,
                  LookupError)


class InterBrokerChannel:
    """Connections from one sender to the brokers of the cluster, found by node id."""

    def __init__(self, client_id: str, endpoint: Callable[[int], Node | None], timeout_s: float = 30.0) -> None:
        self.client_id = client_id
        self.endpoint = endpoint
        self.timeout_s = timeout_s
        self._conns: dict[int, KafkaConnection] = {}
        self._locks: dict[int, trio.Lock] = {}

    async def request(self, node_id: int, api_key: int, version: int, body: dict) -> Any:
        """Send one request to ``node_id`` and return its parsed response; raises one of
        :data:`CHANNEL_ERRORS` (the connection is closed) when it cannot."""
        lock = self._locks.setdefault(node_id, trio.Lock())
        async with lock:
            try:
                with trio.fail_after(self.timeout_s):
                    conn = self._conns.get(node_id)
                    if conn is None:
                        node = self.endpoint(node_id)
                        if node is None or node.port < 0:
                            raise LookupError(f"broker {node_id} is not live")
                        conn = self._conns[node_id] = await KafkaConnection.connect(node.host, node.port,
                                                                                    client_id=self.client_id)
                    return await conn.request(api_key, version, body)
            except BaseException:
                await self._close(node_id)
                raise

    async def _close(self, node_id: int) -> None:
        conn = self._conns.pop(node_id, None)
        if conn is not None:
            with trio.CancelScope(shield=True):
                try:
                    await conn.aclose()
                except CHANNEL_ERRORS:
                    pass

    async def aclose(self) -> None:
        for node_id in list(self._conns):
            await self._close(node_id)
