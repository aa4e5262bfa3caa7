"""A cluster of processes: one controller (``process.roles=controller``) and N brokers (``process.roles=broker``),
each a ``minikafka serve`` of its own, started, watched and failed on purpose.

:class:`ProcessCluster` starts the controller, then the brokers pointed at it
(``controller.quorum.bootstrap.servers``), each with its node id, port and data dir (``<data_dir>/controller``,
``<data_dir>/broker-<id>``), and learns where each listens from its ready line.  Failures are the operating
system's: :meth:`ProcessCluster.kill` is SIGKILL (no shutdown at all: the controller fences the broker when its
session expires), :meth:`~ProcessCluster.pause` SIGSTOP and :meth:`~ProcessCluster.resume` SIGCONT,
:meth:`~ProcessCluster.stop` SIGTERM (a controlled shutdown: leadership moves off the broker first).  A process
that dies without being told to is reported (:attr:`ProcessCluster.on_exit`), never restarted behind the user's
back; :meth:`~ProcessCluster.start` brings one back on its port and data dir.  Each process's log goes to
``<data_dir>/<name>.log``.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from .network import CLIENTS, ProxyNetwork

log = logging.getLogger(__name__)

#: The controller's node id (brokers are 0..N-1; Kafka's controllers and brokers need distinct ids).
CONTROLLER_ID = 3000
CONTROLLER = "controller"
READY = re.compile(r"ready on (\S+):(\d+)")


def proxy_address(node: NodeProcess) -> str:
    """A node's own loopback address with a network of proxies: 127.0.0.100 the controller, 127.0.0.10 + id a
    broker."""
    return "127.0.0.100" if node.name == CONTROLLER else f"127.0.0.{10 + node.node_id}"


class ProcessError(Exception):
    """A process did not start, or a name is not one of the cluster's."""


@dataclass
class NodeProcess:
    """One process of the cluster."""

    name: str  # "controller" or the broker id as text
    node_id: int
    args: list[str]
    data_dir: Path
    port: int = 0
    host: str = "127.0.0.1"
    popen: subprocess.Popen | None = None
    paused: bool = False
    expected_exit: bool = False
    source_address: str = ""  # its own loopback address, with a network of proxies
    exits: list[int] = field(default_factory=list)  # exit codes, oldest first

    @property
    def running(self) -> bool:
        return self.popen is not None and self.popen.poll() is None

    @property
    def pid(self) -> int | None:
        return self.popen.pid if self.popen is not None else None


class ProcessCluster:
    """A controller process and ``num_brokers`` broker processes (see the module docstring)."""

    def __init__(self, num_brokers: int = 3, data_dir: Path | None = None, *, host: str = "127.0.0.1",
                 base_port: int = 0, overrides: dict[str, str] | None = None, extra_args: list[str] | None = None,
                 python: str = sys.executable, log_level: str = "INFO", start_timeout_s: float = 60.0,
                 network: bool = False) -> None:
        """``overrides``: server.properties keys for every process (``-o KEY=VALUE``); ``extra_args``: more
        ``minikafka serve`` arguments for each (``--config FILE``...); ``base_port``: brokers on base+id (0: free
        ports, kept across restarts).  ``network``: every node behind a proxy on a loopback address of its own, so
        that :meth:`partition` can cut links (:mod:`~minikafka.supervisor.network`)."""
        self._temp = data_dir is None
        self.data_dir = Path(tempfile.mkdtemp(prefix="minikafka-cluster-")) if data_dir is None else Path(data_dir)
        self.host = host
        self.python = python
        self.log_level = log_level
        self.start_timeout_s = start_timeout_s
        self.overrides = dict(overrides or {})
        self.extra_args = list(extra_args or [])
        self.on_exit: Callable[[NodeProcess, int], None] = self._report_exit
        self.controller = NodeProcess(CONTROLLER, CONTROLLER_ID, [], self.data_dir / CONTROLLER)
        self.brokers = {i: NodeProcess(str(i), i, [], self.data_dir / f"broker-{i}",
                                       port=base_port + i if base_port else 0) for i in range(num_brokers)}
        self._lock = threading.Lock()
        self.network: ProxyNetwork | None = None
        if network:
            self.network = ProxyNetwork()
            self.network.start()
            for node in (self.controller, *self.brokers.values()):
                address = proxy_address(node)
                self.network.add_node(node.name, address)
                node.source_address = address

    # -- addresses -----------------------------------------------------------------------------------------------
    def address(self, node: NodeProcess) -> tuple[str, int]:
        """Where others reach ``node``: its proxy with ``network``, else where it listens."""
        return self.network.address(node.name) if self.network is not None else (node.host, node.port)

    @property
    def controller_address(self) -> str:
        return "%s:%d" % self.address(self.controller)

    @property
    def bootstrap(self) -> str:
        """``host:port`` of every broker, comma separated (running or not: a client's bootstrap list)."""
        return ",".join("%s:%d" % self.address(b) for b in self.brokers.values())

    def node(self, name: str | int) -> NodeProcess:
        """The controller (``"controller"``) or a broker (its id); ProcessError for another name."""
        if str(name) == CONTROLLER:
            return self.controller
        try:
            return self.brokers[int(name)]
        except (ValueError, KeyError):
            raise ProcessError(f"no node {name!r} (nodes: controller, {', '.join(map(str, self.brokers))})") from None

    # -- lifecycle -----------------------------------------------------------------------------------------------
    def start_all(self) -> ProcessCluster:
        """Start the controller, then every broker; returns once each listens."""
        self.start(CONTROLLER)
        for broker_id in self.brokers:
            self.start(broker_id)
        return self

    def _command(self, node: NodeProcess) -> list[str]:
        settings = dict(self.overrides)
        if node is self.controller:
            settings["process.roles"] = "controller"
        else:
            settings.update({"process.roles": "broker", "controller.quorum.bootstrap.servers": self.controller_address})
            if self.network is not None:  # advertised at its proxy; its own connections come from its address
                host, port = self.network.address(node.name)
                settings.update({"advertised.listeners": f"PLAINTEXT://{host}:{port}",
                                 "minikafka.source.address": node.source_address})
        args = [self.python, "-m", "minikafka", "serve", "--host", node.host, "--port", str(node.port), "--node-id",
                str(node.node_id), "--data-dir", str(node.data_dir), "--log-level", self.log_level, *self.extra_args]
        for key, value in settings.items():
            args += ["-o", f"{key}={value}"]
        return args

    def start(self, name: str | int) -> NodeProcess:
        """Start one process (on the port it had, if it ran before); returns once it listens."""
        node = self.node(name)
        if node.running:
            return node
        node.data_dir.mkdir(parents=True, exist_ok=True)
        node.args = self._command(node)
        log_file = open(self.data_dir / f"{node.name if node is self.controller else 'broker-' + node.name}.log", "ab")
        try:
            popen = subprocess.Popen(node.args, stdout=subprocess.PIPE, stderr=log_file, stdin=subprocess.DEVNULL,
                                     env={**os.environ, "PYTHONUNBUFFERED": "1"})
        finally:
            log_file.close()
        node.popen, node.paused, node.expected_exit = popen, False, False
        ready = threading.Event()
        threading.Thread(target=self._watch, args=(node, popen, ready), daemon=True,
                         name=f"minikafka-watch-{node.name}").start()
        if not ready.wait(self.start_timeout_s) or not node.running:
            self._signal(node, signal.SIGKILL)
            raise ProcessError(f"{self._label(node)} did not start (see {self.data_dir}/*.log): {node.args}")
        if self.network is not None:
            self.network.set_target(node.name, node.host, node.port)
        log.info("%s started (pid %d) on %s:%d", self._label(node), popen.pid, node.host, node.port)
        return node

    def _watch(self, node: NodeProcess, popen: subprocess.Popen, ready: threading.Event) -> None:
        """Read the process's output for its ready line, then until it ends; report an exit nobody asked for."""
        assert popen.stdout is not None
        for raw in popen.stdout:
            line = raw.decode(errors="replace").rstrip()
            match = READY.search(line)
            if match and not ready.is_set():
                node.host, node.port = match.group(1), int(match.group(2))
                ready.set()
        code = popen.wait()
        ready.set()
        with self._lock:
            node.exits.append(code)
            expected = node.expected_exit
        if not expected:
            self.on_exit(node, code)

    def _report_exit(self, node: NodeProcess, code: int) -> None:
        log.warning("%s (pid %s) exited with %s; not restarted", self._label(node), node.pid,
                    f"signal {-code}" if code < 0 else f"code {code}")

    @staticmethod
    def _label(node: NodeProcess) -> str:
        return CONTROLLER if node.name == CONTROLLER else f"broker {node.name}"

    def _signal(self, node: NodeProcess, sig: signal.Signals) -> None:
        if node.popen is not None and node.popen.poll() is None:
            node.popen.send_signal(sig)

    # -- failures ------------------------------------------------------------------------------------------------
    def kill(self, name: str | int) -> None:
        """SIGKILL: the process ends at once, nothing flushed or said to anyone."""
        node = self.node(name)
        node.expected_exit = True
        if node.paused:
            self._signal(node, signal.SIGCONT)
        self._signal(node, signal.SIGKILL)
        self._wait(node)
        log.info("%s killed", self._label(node))

    def stop(self, name: str | int, timeout_s: float = 30.0) -> None:
        """SIGTERM: a clean stop (a broker's controlled shutdown), SIGKILL after ``timeout_s``."""
        node = self.node(name)
        node.expected_exit = True
        if node.paused:
            self.resume(name)
        self._signal(node, signal.SIGTERM)
        if not self._wait(node, timeout_s):
            self._signal(node, signal.SIGKILL)
            self._wait(node)

    def pause(self, name: str | int) -> None:
        """SIGSTOP: the process runs nothing until :meth:`resume` (its connections stay open, unanswered)."""
        node = self.node(name)
        if not node.running:
            raise ProcessError(f"{self._label(node)} is not running")
        self._signal(node, signal.SIGSTOP)
        node.paused = True

    def resume(self, name: str | int) -> None:
        """SIGCONT."""
        node = self.node(name)
        self._signal(node, signal.SIGCONT)
        node.paused = False

    def restart(self, name: str | int, *, hard: bool = False) -> NodeProcess:
        """Stop (SIGKILL when ``hard``: a hard bounce) and start again on the same port and data dir."""
        (self.kill if hard else self.stop)(name)
        return self.start(name)

    @staticmethod
    def _wait(node: NodeProcess, timeout_s: float = 30.0) -> bool:
        if node.popen is None:
            return True
        try:
            node.popen.wait(timeout_s)
            return True
        except subprocess.TimeoutExpired:
            return False

    # -- network partitions (with ``network``) -----------------------------------------------------------------------
    def partition(self, sides: list[list[str | int]]) -> None:
        """Cut the links between nodes of different ``sides`` (broker ids, ``"controller"``, ``"clients"``)."""
        if self.network is None:
            raise ProcessError("network partitions need each node behind its proxy: serve --network-partitions "
                               "(ProcessCluster(network=True))")
        known = {CONTROLLER, CLIENTS, *map(str, self.brokers)}
        names = [[str(n) for n in side] for side in sides]
        unknown = {n for side in names for n in side} - known
        if len(names) < 2 or unknown:
            raise ProcessError(f"not two sides or more of known nodes ({sorted(known)}): {sides}")
        self.network.partition(names)
        log.info("network partition: %s", " | ".join(" ".join(side) for side in names))

    def isolate(self, name: str | int) -> None:
        """Cut one node off from every other node and from the clients."""
        node = self.node(name)
        others = [n.name for n in (self.controller, *self.brokers.values()) if n is not node]
        self.partition([[node.name], [*others, CLIENTS]])

    def heal(self) -> None:
        """Heal every network partition."""
        if self.network is not None:
            self.network.heal()
            log.info("network healed")

    def state(self, name: str | int) -> str:
        """``running``, ``paused`` or ``stopped``."""
        node = self.node(name)
        return "paused" if node.running and node.paused else "running" if node.running else "stopped"

    def status(self) -> list[str]:
        return [f"{self._label(n)}: {self.state(n.name)} on {n.host}:{n.port} (pid {n.pid})"
                for n in (self.controller, *self.brokers.values())]

    def close(self) -> None:
        """Stop every broker, then the controller (SIGKILL for any that does not stop); a temporary data dir is
        removed."""
        for broker_id, node in self.brokers.items():
            if node.running:
                node.expected_exit = True
                if node.paused:
                    self.resume(broker_id)
                self._signal(node, signal.SIGTERM)
        for node in self.brokers.values():
            if not self._wait(node, 15):
                self._signal(node, signal.SIGKILL)
                self._wait(node)
        if self.controller.running:
            self.stop(CONTROLLER, 15)
        if self.network is not None:
            self.network.close()
        if self._temp:
            shutil.rmtree(self.data_dir, ignore_errors=True)

    def __enter__(self) -> ProcessCluster:
        return self.start_all()

    def __exit__(self, *exc: object) -> None:
        self.close()
