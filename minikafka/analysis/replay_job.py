"""Wire replay distributed over Spark executors, keeping the capture's causality across tasks.

Resembles running many ``kafka-producer-perf-test``/``kafka-consumer-perf-test``
workers (Trogdor agents) against one cluster, but every worker replays recorded
connections with :mod:`minikafka.capture.replay` and the driver merges their
:class:`~minikafka.capture.replay.ReplayReport`\\ s.

The driver reads the capture once and builds the :class:`~minikafka.capture.replay.plan.ReplayPlan`
(per-connection streams and the dependencies between them: "connection *c* has
settled its first *n* requests"), broadcasts it (it holds no frames), deals the
connections to tasks and starts a :class:`~minikafka.capture.replay.hub.threaded.ReplayHub`.
Each task reads the capture itself, keeps its connections' records and runs the
ordinary Trio replayer on them with a :class:`~minikafka.capture.replay.hub.sync.HubSync`:
its progress, the values the target made up (producer ids, member ids, fetch
sessions, topic ids) and member epochs go to the hub, which forwards them to the
other tasks, so a Produce in one task waits for the InitProducerId another task
replays and sends the producer id the target gave there.  Frames are not shipped
through the driver: they are the bulk of a capture, and reading is a sequential
scan each executor can do from shared storage (the capture paths must be readable
by every executor: a shared filesystem on a real cluster, any path with ``local[N]``).

Why a coordinator, and not the issue's other two options:

* *barrier stages per dependency epoch* (all tasks replay up to a cut, then a
  ``BarrierTaskContext.barrier()``) would serialise the replay on its
  cross-connection dependencies: the six-client capture has hundreds of them
  (every Fetch after another connection's Produce, every group join), so either
  hundreds of barriers of a few requests each (each a driver round trip for every
  task) or coarse epochs that hold back requests that could go.  The hub waits
  exactly as long as each dependency needs and costs one message per batch.
* *co-locating connections that touch the same topic or group* in one task
  avoids cross-task waits, but real captures are one component (every client's
  Metadata reads the topics the admin created; consumers fetch what producers
  wrote): the whole capture would land in one task.  ``deal="components"`` still
  packs the dependency components into tasks when that keeps them balanced.

The hub also serves one clock: paced modes (``1x``, ``Nx``) pick the base time
on the hub's clock and each task converts it with its estimated offset, so
connections in different executors keep their captured relative timing.

All tasks must run at once (a task waits for the others' connections): the
replay runs as a barrier-mode stage (Spark schedules all its tasks together, or
none) with at most as many tasks as the cluster has task slots.  Spark retries a
failed barrier stage as a whole: a retried replay sends the capture again to a
target that has seen part of it.  ``--scale K`` replays whole copies that do not
wait on each other: copies are dealt to tasks (no hub traffic but the clock).
pyspark is imported here only.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import trio

from ..capture.reading import read_capture
from ..capture.replay import ConnKey, ReplayOptions, ReplayReport
from ..capture.replay.hub.client import Address, connect_hub
from ..capture.replay.hub.sync import HubSync, remote_needs
from ..capture.replay.hub.threaded import ReplayHub
from ..capture.replay.plan import ReplayPlan, build_plan
from ..capture.replay.runner import group_connections, replay_records, run_replay_copies
from ..common.clock import SYSTEM_CLOCK, Clock

log = logging.getLogger(__name__)

DEFAULT_LEAD_S = 3.0
#: How long the driver waits for executors to register enough task slots.
SLOT_WAIT_S = 60.0
#: ``deal="auto"``: pack dependency components into tasks unless the busiest task gets this much more than a
#: fair share of the requests.
COMPONENT_IMBALANCE = 1.25
DEALS = ("auto", "round-robin", "components")


def index_capture(paths: Iterable[str | Path]) -> dict[ConnKey, int]:
    """Requests per (broker id, connection id) of the capture."""
    counts: dict[ConnKey, int] = {}
    for r in read_capture(paths):
        key = (r.broker_id, r.connection_id)
        counts[key] = counts.get(key, 0) + 1
    return counts


def deal_connections(plan: ReplayPlan, tasks: int, deal: str = "auto") -> list[list[int]]:
    """The plan's connection indexes dealt into at most ``tasks`` non-empty shares.

    ``round-robin``: busiest connection first, one per task in turn (balanced by requests); ``components``: the
    dependency components (:meth:`ReplayPlan.components`) packed busiest-first into the least loaded task, so
    no dependency crosses tasks (fewer tasks if there are fewer components); ``auto``: components if that keeps
    the busiest task within :data:`COMPONENT_IMBALANCE` of a fair share and uses every task, else round-robin.

    Measured on the 100,000-request benchmark capture (22 connections, 490k cross-connection dependencies, one
    component of all but 2 requests): round-robin puts half the dependencies across 2 tasks; a greedy search
    for a balanced cut (moves and swaps of connections) saved only 4% of them at a 60/40 split -- every consumer
    fetches what every producer wrote -- so it is not done."""
    if deal not in DEALS:
        raise ValueError(f"deal must be one of {', '.join(DEALS)}, not {deal!r}")
    tasks = max(1, min(tasks, len(plan.keys)))
    if deal != "round-robin":
        bins: list[list[int]] = [[] for _ in range(tasks)]
        loads = [0] * tasks
        for comp in plan.components():  # biggest first
            i = loads.index(min(loads))
            bins[i] += comp
            loads[i] += sum(plan.sizes[c] for c in comp)
        packed = [sorted(b) for b in bins if b]
        fair = sum(plan.sizes) / tasks
        if deal == "components" or (len(packed) == tasks and max(loads) <= COMPONENT_IMBALANCE * fair):
            return packed
    order = sorted(range(len(plan.keys)), key=lambda c: -plan.sizes[c])
    return [sorted(order[i::tasks]) for i in range(tasks) if order[i::tasks]]


def _replay_task(paths: list[str], options: ReplayOptions, plan_bc: Any, address: Address
                 ) -> Callable[[Iterator[Any]], Iterator[ReplayReport]]:
    """The function each task runs: replay its share of the connections, synchronised through the hub."""

    def run(items: Iterator[Any]) -> Iterator[ReplayReport]:
        logging.basicConfig(level=logging.WARNING)
        for index, share in items:
            plan: ReplayPlan = plan_bc.value
            keys = {plan.keys[c] for c in share}
            conns = group_connections(read_capture(paths), keys)
            sync = HubSync(address, f"task-{index}", share, plan.sizes, needs=remote_needs(plan, share))
            yield trio.run(replay_records, conns, options, None, plan, sync)

    return run


async def _hub_offset(address: Address, task: str) -> int:
    async with connect_hub(address, task=task) as client:
        return client.offset_ns


def _copies_task(paths: list[str], options: ReplayOptions, address: Address
                 ) -> Callable[[Iterator[Any]], Iterator[ReplayReport]]:
    """``--scale``: each task replays its copies of the whole capture; a paced base time is converted from the
    hub's clock to the task's."""

    def run(items: Iterator[Any]) -> Iterator[ReplayReport]:
        logging.basicConfig(level=logging.WARNING)
        for index, copies in items:
            opts = options
            if options.base_time_ns is not None:
                offset = trio.run(_hub_offset, address, f"task-{index}")
                opts = replace(options, base_time_ns=options.base_time_ns - offset)
            yield run_replay_copies(paths, opts, copies)

    return run


def _session(master: str | None) -> Any:
    from .session import spark_session

    try:
        return spark_session(master=master, app_name="minikafka-replay")
    except ImportError as exc:  # the analysis data source failed to load; the session itself is up
        from pyspark.sql import SparkSession

        log.warning("spark session without the minikafka data source: %s", exc)
        spark = SparkSession.getActiveSession()
        if spark is None:
            raise
        return spark


def task_slots(sc: Any, want: int, wait_s: float = SLOT_WAIT_S, clock: Clock = SYSTEM_CLOCK) -> int:
    """How many tasks the cluster runs at once, waiting up to ``wait_s`` for executors to register ``want``
    (not in local mode: its slots are there from the start)."""
    if str(sc.master).startswith("local"):
        wait_s = 0.0
    try:
        jsc = sc._jsc.sc()
        profile = jsc.resourceProfileManager().defaultResourceProfile()
        deadline = clock.monotonic() + wait_s
        while True:
            slots = int(jsc.maxNumConcurrentTasks(profile))
            if slots >= want or clock.monotonic() >= deadline:
                return slots
            clock.sleep(200)
    except Exception as exc:  # noqa: BLE001 - a Spark without that (internal) call
        log.debug("task slots unknown (%s): using the default parallelism", exc)
        return int(sc.defaultParallelism)


def run_spark_replay(paths: Iterable[str | Path], options: ReplayOptions, master: str | None = None,
                     partitions: int | None = None, lead_s: float = DEFAULT_LEAD_S,
                     spark: Any = None, deal: str = "auto", hub_host: str | None = None,
                     clock: Clock = SYSTEM_CLOCK) -> ReplayReport:
    """Replay a capture with its connections spread over Spark tasks; returns the merged report.

    ``partitions`` (the number of tasks) defaults to the session's default parallelism and is capped at the
    cluster's task slots (all tasks run at once) and the number of connections (``--scale``: of copies).
    ``master`` is passed to :func:`minikafka.analysis.session.spark_session` (``local[*]`` if None).
    ``deal`` says how connections are dealt to tasks (:func:`deal_connections`); ``hub_host`` is the address
    executors reach the driver's hub at (default: ``spark.driver.host``); ``clock`` times the phases.
    """
    resolved = [str(Path(p).resolve()) for p in paths]
    spark = spark if spark is not None else _session(master)
    sc = spark.sparkContext
    want = max(1, partitions or sc.defaultParallelism)
    host = hub_host or sc.getConf().get("spark.driver.host", None) or "127.0.0.1"
    started = clock.monotonic()
    plan: ReplayPlan | None = None
    if options.scale <= 1:
        conns = group_connections(read_capture(resolved))
        if not conns:
            raise ValueError("the capture has no records")
        plan = build_plan(conns, options.causality, max_speed=options.speed is None)
        del conns
        if not plan.keys:
            raise ValueError("the capture has no requests to replay")
        log.info("replay plan: %d request(s) on %d connection(s), %d cross-connection dependencies (%.1f s)",
                 plan.total, len(plan.keys), plan.cross_dependencies, clock.monotonic() - started)
    units = options.scale if plan is None else len(plan.keys)
    n = min(want, units)
    slots = task_slots(sc, n, clock=clock)
    if n > slots:
        log.warning("%d task(s) asked for, but the cluster runs %d at once: replaying in %d", n, slots, max(1, slots))
        n = max(1, slots)
    if plan is None:  # --scale: copies dealt round-robin
        items: list[tuple[int, list[int]]] = [(i, list(range(i, options.scale, n))) for i in range(n)]
    else:
        items = list(enumerate(deal_connections(plan, n, deal)))
    plan_bc = sc.broadcast(plan) if plan is not None else None
    try:
        with ReplayHub(host=host) as hub:
            opts = replace(options, first_ns=plan.first_ns if plan is not None else None,
                           base_time_ns=None if options.speed is None else hub.now_ns() + int(lead_s * 1e9))
            task = (_copies_task(resolved, opts, hub.address) if plan_bc is None
                    else _replay_task(resolved, opts, plan_bc, hub.address))
            log.info("replaying in %d Spark task(s) (hub at %s:%d)", len(items), *hub.address)
            # One share per partition (parallelize slices a list of n into n single elements); barrier mode
            # runs all the tasks at once.
            rdd = sc.parallelize(items, len(items)).barrier().mapPartitions(task)
            collected: list[ReplayReport] = rdd.collect()
            log.info("Spark replay: %d task report(s) in %.1f s; hub: %s", len(collected),
                     clock.monotonic() - started, hub.stats)
    finally:
        if plan_bc is not None:
            plan_bc.destroy()
    if not collected:
        return ReplayReport(options.target, options.speed, tasks=0)
    return ReplayReport.combine(collected)  # duration: the longest task's replay
