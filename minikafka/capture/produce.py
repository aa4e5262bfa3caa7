"""Keep a Produce request's bytes as received, without copying the frame.

The broker stamps base offset and partition leader epoch into the request's
record batches in place (they are stored without a copy).  Before the request is
handled, :func:`original_frame_parts` saves the first 16 bytes of every batch
header; the capture then writes the frame as slices of the (stamped) frame with
those saved bytes spliced back in, so the captured frame is exactly what the
client sent.
"""

from __future__ import annotations

import ctypes
from typing import Any

_HEAD = 16  # base offset (8), batch length (4), partition leader epoch (4)


def _address(buf: Any) -> int:
    return ctypes.addressof(ctypes.c_char.from_buffer(buf))


def original_frame_parts(frame: bytearray, req: Any) -> list | bytes | bytearray:
    """The request frame as received, as buffers to concatenate (or a copy when the batches
    cannot be located inside ``frame``, or ``frame`` itself when it holds no batches)."""
    try:
        base = _address(frame)
        size = len(frame)
        patches: list[tuple[int, bytes]] = []
        for td in req.topic_data:
            for pd in td.partition_data:
                recs = pd.records
                if recs is None or not len(recs):
                    continue
                if not isinstance(recs, memoryview) or recs.readonly:
                    return bytes(frame)
                start = _address(recs) - base
                n = recs.nbytes
                if start < 0 or start + n > size:
                    return bytes(frame)
                pos = 0
                while pos + _HEAD <= n:
                    patches.append((start + pos, bytes(recs[pos:pos + _HEAD])))
                    length = int.from_bytes(recs[pos + 8:pos + 12], "big", signed=True)
                    if length <= 0:
                        break
                    pos += 12 + length
    except (TypeError, ValueError, AttributeError):
        return bytes(frame)
    if not patches:
        return frame
    patches.sort()
    mv = memoryview(frame)
    parts: list = []
    last = 0
    for off, orig in patches:
        if off < last:
            return bytes(frame)
        parts.append(mv[last:off])
        parts.append(orig)
        last = off + _HEAD
    parts.append(mv[last:])
    return parts
