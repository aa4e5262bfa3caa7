"""Capture as a request observer of the broker: requests as received, responses when they left."""

from __future__ import annotations

from typing import Any

from ..broker.request import ObserverBase, Request, Response
from ..protocol.api import ApiKey
from .produce import original_frame_parts
from .service import CaptureService


class CaptureObserver(ObserverBase):
    """Hands each answered request to a :class:`CaptureService` once its response was sent.

    Produce batches are stamped with offsets in place while they are handled, so the observer keeps
    the bytes of a Produce request as received (see :mod:`.produce`) before the handler runs.
    """

    def __init__(self, service: CaptureService) -> None:
        self.service = service
        self._originals: dict[int, Any] = {}

    def on_request(self, request: Request) -> None:
        if request.context.api_key == ApiKey.PRODUCE and request.body is not None:
            self._originals[id(request)] = original_frame_parts(request.frame, request.body)

    def on_response_sent(self, response: Response) -> None:
        request = response.request
        raw = self._originals.pop(id(request), request.frame)
        self.service.record(request.context, raw, response.segments, response.injected)
