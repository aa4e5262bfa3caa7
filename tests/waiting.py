"""Waiting for a condition with a deadline: the tests' only polling loops (tests/test_no_fixed_waits.py).

``wait_until`` (Trio) and ``wait_for`` (threads, subprocesses, third-party clients) poll a condition until it
holds and return its truthy value; past the deadline they fail the test, naming what they waited for.  The
deadlines are generous (a loaded runner only makes the wait longer, never the test fail); a passing test waits
only as long as the condition takes.
"""

from __future__ import annotations

import inspect
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import trio

T = TypeVar("T")

POLL_S = 0.01


async def wait_until(cond: Callable[[], T | Awaitable[T]], timeout: float = 10, what: str = "condition",
                     interval: float = POLL_S) -> T:
    """Poll ``cond`` (plain or async) every ``interval`` seconds of Trio time until it returns something truthy,
    and return that; fail after ``timeout`` seconds."""
    with trio.move_on_after(timeout):
        while True:
            value = cond()
            if inspect.isawaitable(value):
                value = await value
            if value:
                return value  # type: ignore[return-value]
            await trio.sleep(interval)  # fixed wait: the polling interval of this condition wait
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


def wait_for(cond: Callable[[], T], timeout: float = 30, what: str = "condition", interval: float = 0.02) -> T:
    """Poll ``cond`` every ``interval`` seconds (blocking) until it returns something truthy, and return that;
    fail after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not (value := cond()):
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(interval)  # fixed wait: the polling interval of this condition wait
    return value


def wait_for_no_connections(bt: Any, timeout: float = 30) -> None:
    """Wait until the broker of ``bt`` (a :class:`minikafka.testing.BrokerThread`) has no connection left: the
    clients that closed are gone, and it handled every request they sent."""
    wait_for(lambda: bt.call(lambda: bt.broker.server.open_connections == 0), timeout,
             "the broker to see every client connection closed")


class Hung(Exception):
    """A blocking call still running when :func:`bounded` gave up on it."""


def bounded(call: Callable[[], T], seconds: float) -> T:
    """``call()`` in a daemon thread of its own, given up on (:class:`Hung`) after ``seconds``: for a real
    client's call that can block past its own timeout (librdkafka's coordinator requests, issues #5456 and #5511:
    a group coordinator dropped from the metadata, as a crashed broker is, is never looked up again).  The
    caller then abandons the client (never touching it again: the call may still be running)."""
    import threading

    result: dict[str, Any] = {}

    def run() -> None:
        try:
            result["value"] = call()
        except BaseException as exc:  # re-raised in the caller's thread
            result["error"] = exc

    thread = threading.Thread(target=run, daemon=True, name="bounded-call")
    thread.start()
    thread.join(seconds)
    if thread.is_alive():
        raise Hung(f"{call} still blocked after {seconds} s")
    if "error" in result:
        raise result["error"]
    return result["value"]


def stacks(threads: list[Any]) -> str:
    """Where each of ``threads`` still running is: its stack (for a failure message about a thread that did not
    stop)."""
    import sys
    import traceback

    frames = sys._current_frames()
    return "\n".join("".join(traceback.format_stack(frames[t.ident])) for t in threads
                     if t.is_alive() and t.ident in frames)
