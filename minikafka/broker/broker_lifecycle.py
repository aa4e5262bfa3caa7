"""A broker process's life with its controller (Kafka's ``BrokerLifecycleManager``).

It registers (BrokerRegistration, retried until the controller answers), waits until its metadata loader has
applied the log up to its own registration (so that it serves with the leadership the controller gave it),
then heartbeats every ``broker.heartbeat.interval.ms`` with the offset it has applied.  A heartbeat answered
STALE_BROKER_EPOCH (the controller fenced it: its session expired while it was stopped, paused or cut off)
is followed by a new registration, as a KRaft broker whose heartbeats come back is unfenced.  On a clean
stop it asks for a controlled shutdown (``want_shut_down``): leadership moves off it before it goes.  It also
keeps the broker supplied with producer ids (:class:`ProducerIdBlocks`, Kafka's ``RPCProducerIdManager``).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable

import trio

from ..protocol.errors import ErrorCode
from .controller_client import ControllerClient, ControllerError
from .inter_broker import CHANNEL_ERRORS
from .metadata_loader import MetadataLoader
from .producer_state import ProducerIdBlocks

log = logging.getLogger(__name__)


class BrokerLifecycleManager:
    """Registration, heartbeats and controlled shutdown of one broker process."""

    def __init__(self, client: ControllerClient, loader: MetadataLoader, listeners: Callable[[], list[dict]],
                 rack: str | None, heartbeat_interval_ms: int, producer_ids: ProducerIdBlocks,
                 on_registered: Callable[[], None]) -> None:
        """``listeners``: the BrokerRegistration listener entries (known once the broker is bound);
        ``on_registered``: told after each registration once the broker has applied the log up to it."""
        self.client = client
        self.loader = loader
        self.listeners = listeners
        self.rack = rack
        self.interval_s = max(heartbeat_interval_ms / 1000, 0.001)
        self.producer_ids = producer_ids
        self.on_registered = on_registered
        self.incarnation_id = uuid.uuid4()
        self.nursery: trio.Nursery | None = None
        self.registered = False

    async def start(self, nursery: trio.Nursery) -> None:
        """Run the metadata loader, register, wait until the log is applied up to the registration and a block of
        producer ids is here; then heartbeat in ``nursery``."""
        self.nursery = nursery
        self.producer_ids.request_block = lambda: nursery.start_soon(self._fetch_producer_ids)
        nursery.start_soon(self.loader.run)
        await self._register()
        while self.producer_ids.available == 0:
            await self._fetch_producer_ids()
        nursery.start_soon(self._heartbeat_loop)

    async def _register(self) -> None:
        backoff = 0.05
        while True:
            try:
                epoch = await self.client.register(self.incarnation_id, self.listeners(), self.rack)
                break
            except (*CHANNEL_ERRORS, ControllerError) as exc:
                log.info("broker %d: registration with the controller failed (%r); retrying", self.client.node_id,
                         exc)
                await trio.sleep(backoff)
                backoff = min(backoff * 2, 1.0)
        await self.loader.wait_for_offset(epoch + 1)
        self.registered = True
        log.info("broker %d: registered with the controller (broker epoch %d)", self.client.node_id, epoch)
        self.on_registered()

    async def _heartbeat_loop(self) -> None:
        while True:
            await trio.sleep(self.interval_s)
            try:
                resp = await self.client.heartbeat(self.loader.offset)
            except CHANNEL_ERRORS as exc:
                log.debug("broker %d: heartbeat failed: %r", self.client.node_id, exc)
                continue
            if resp["error_code"] == ErrorCode.STALE_BROKER_EPOCH:
                log.info("broker %d: fenced by the controller; registering again", self.client.node_id)
                self.registered = False
                await self._register()
            elif resp["error_code"] != ErrorCode.NONE:
                log.info("broker %d: heartbeat answered %s", self.client.node_id, ErrorCode(resp["error_code"]).name)

    async def _fetch_producer_ids(self) -> None:
        try:
            first, count = await self.client.allocate_producer_ids()
        except (*CHANNEL_ERRORS, ControllerError) as exc:
            log.info("broker %d: no producer ids from the controller: %r", self.client.node_id, exc)
            self.producer_ids.request_failed()
            await trio.sleep(0.1)
            return
        self.producer_ids.add_block(first, count)

    async def controlled_shutdown(self, timeout_s: float) -> bool:
        """Ask the controller to move leadership off this broker before it stops; True once it said so."""
        if not self.registered:
            return False
        with trio.move_on_after(timeout_s):
            try:
                resp = await self.client.heartbeat(self.loader.offset, want_shut_down=True)
                return bool(resp["should_shut_down"])
            except CHANNEL_ERRORS as exc:
                log.info("broker %d: no controlled shutdown: %r", self.client.node_id, exc)
        return False
