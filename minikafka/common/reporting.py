"""How a command reports a failure: one line and exit status 1 for the errors it expects, 130 for Ctrl-C."""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable

log = logging.getLogger(__name__)


def find_error(exc: BaseException, types: tuple[type[BaseException], ...]) -> BaseException | None:
    """``exc`` if it is one of ``types``, or the first such error inside a Trio exception group."""
    if isinstance(exc, BaseExceptionGroup):
        for inner in exc.exceptions:
            found = find_error(inner, types)
            if found is not None:
                return found
        return None
    return exc if isinstance(exc, types) else None


def run_reporting(work: Callable[[], int], reported: Callable[[BaseException], BaseException | None]) -> int:
    """``work()``'s exit status; the failures ``reported`` picks print one line
    (``minikafka: error: ...``) and give status 1, Ctrl-C gives 130, anything else propagates."""
    try:
        return work()
    except KeyboardInterrupt:
        return 130
    except BaseException as exc:
        err = reported(exc)
        if err is None:
            raise
        log.debug("command failed", exc_info=exc)
        print(f"minikafka: error: {err}", file=sys.stderr)
        return 1
