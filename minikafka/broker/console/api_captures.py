"""Console API: traffic captures (:mod:`minikafka.capture`), their pcap export and their analysis.

A capture is the broker's :class:`~minikafka.broker.recording.TrafficRecorder` (the
:class:`~minikafka.capture.service.CaptureService` behind a request observer, given to the broker as its
:class:`~minikafka.broker.recording.CaptureSupport`)
(what ``serve --capture-dir`` starts with the broker), started and stopped here at run time
(:meth:`Broker.start_capture <minikafka.broker.broker.Broker.start_capture>`) on every running broker,
into the configured ``capture.dir`` (else ``<data_dir>/captures``, else a temporary directory).

* ``GET /console/api/captures`` (DESCRIBE on the CLUSTER): whether it captures, where, the files, the
  analysis' state;
* ``POST /console/api/captures/start`` and ``/stop`` (ALTER on the CLUSTER);
* ``GET /console/api/captures/files/{name}/pcap`` (DESCRIBE on the CLUSTER): one capture file, or
  ``all`` of them, as a pcap (:func:`minikafka.capture.pcap.write_pcap`, what ``minikafka capture
  export`` writes);
* ``POST /console/api/captures/analyze`` (ALTER on the CLUSTER; optional body ``{"jobs": [...]}``):
  ``python -m minikafka analyze`` of the capture directory as a subprocess, one run at a time, when
  PySpark is installed;
  ``GET /console/api/captures/report`` serves the report it wrote.
"""

from __future__ import annotations

import importlib.util
import logging
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import trio
from starlette.requests import Request
from starlette.responses import FileResponse, Response, StreamingResponse
from starlette.routing import BaseRoute, Route

from ..admin_target import AdminTarget
from ..recording import CaptureSupport
from ..security.acl import CLUSTER_NAME, AclOperation, ResourceType
from .context import ConsoleContext, ConsoleError, api
from .httpio import has_body, read_json

log = logging.getLogger(__name__)

OUTPUT_TAIL = 4000  # characters of the analysis' output kept for the page
EXPORT_CHUNK = 1 << 20  # bytes of a pcap read (in a worker thread) per chunk sent


def pyspark_available() -> bool:
    return importlib.util.find_spec("pyspark") is not None


@dataclass
class AnalysisRun:
    """One ``minikafka analyze`` subprocess: its state, output and report."""

    out_dir: Path
    started: float  # epoch seconds (the target's clock)
    state: str = "running"  # running, done, failed
    finished: float | None = None
    returncode: int | None = None
    output: str = ""

    def as_json(self) -> dict[str, Any]:
        return {"state": self.state, "started": self.started, "finished": self.finished,
                "returncode": self.returncode, "output": self.output[-OUTPUT_TAIL:],
                "report": (self.out_dir / "report.html").is_file()}


class CaptureControl:
    """Starts and stops the brokers' captures, exports them and runs their analysis."""

    def __init__(self, target: AdminTarget) -> None:
        self.target = target
        self._temp: Path | None = None
        self.analysis: AnalysisRun | None = None
        self._exporting = trio.Semaphore(1)  # one pcap export at a time (each reads whole capture files)

    def support(self) -> CaptureSupport | None:
        """The brokers' capture (None: they were given none)."""
        cluster = self.target.cluster
        if cluster is not None:
            return cluster.captures
        return next((b.captures for b in self.target.brokers().values() if b.captures is not None), None)

    def directory(self, create: bool = False) -> Path | None:
        """Where captures go: a broker's ``capture.dir``, else ``<data_dir>/captures``, else a temporary
        directory (made by the first capture: None before, unless ``create``)."""
        for broker in self.target.brokers().values():
            if broker.capture is not None:
                return broker.capture.directory
        for broker in self.target.brokers().values():
            if broker.config.capture_dir is not None:
                return Path(broker.config.capture_dir)
        cluster = self.target.cluster
        data_dir = cluster.data_dir if cluster is not None else next(
            (b.config.data_dir for b in self.target.brokers().values()), None)
        if data_dir is not None:
            return Path(data_dir) / "captures"
        if self._temp is None and create:
            self._temp = Path(tempfile.mkdtemp(prefix="minikafka-captures-"))
        return self._temp

    def files(self) -> list[dict[str, Any]]:
        directory = self.directory()
        writing = {b.capture.current_file for b in self.target.brokers().values()
                   if b.capture is not None and b.capture.current_file is not None}
        support = self.support()
        out = []
        if directory is not None and directory.is_dir() and support is not None:
            for path in sorted(directory.iterdir()):
                m = support.file_pattern.search(path.name)
                if m is None or not path.is_file():
                    continue
                st = path.stat()
                out.append({"name": path.name, "broker": int(m.group(1)), "size": st.st_size,
                            "modified": st.st_mtime, "writing": path.name in writing})
        return out

    def status(self) -> dict[str, Any]:
        running = {i: b.capture for i, b in sorted(self.target.brokers().items()) if b.capture is not None}
        directory = self.directory()
        return {"capturing": bool(running), "directory": str(directory) if directory is not None else None,
                "brokers": [{"id": i, "captured": c.captured, "dropped": c.dropped} for i, c in running.items()],
                "files": self.files(), "analysis_available": pyspark_available(),
                "analysis": self.analysis.as_json() if self.analysis is not None else None}

    async def start(self) -> None:
        """Start capturing on every running broker not capturing yet; all or none (a broker that cannot
        start undoes the ones started, and the call answers 409)."""
        directory = self.directory(create=True)
        assert directory is not None
        started: list[Any] = []
        for broker in self.target.brokers().values():
            if broker.capture is None:
                try:
                    broker.start_capture(directory)
                except Exception as exc:  # not running, or the directory cannot be made (OSError)
                    for other in started:
                        await other.stop_capture()
                    log.warning("capture not started on broker %d: %s", broker.node_id, exc)
                    raise ConsoleError(409, "CAPTURE_NOT_STARTED", f"broker {broker.node_id}: {exc}") from None
                started.append(broker)
        if not started:
            raise ConsoleError(409, "ALREADY_CAPTURING", f"already capturing into {directory}")

    async def stop(self) -> None:
        stopped = [c for b in list(self.target.brokers().values()) if (c := await b.stop_capture()) is not None]
        if not stopped:
            raise ConsoleError(409, "NOT_CAPTURING", "no capture is running")

    def path_of(self, name: str) -> list[Path]:
        """The capture file called ``name`` (``all``: every one), 404 when there is none."""
        directory, support = self.directory(), self.support()
        if directory is None or support is None:
            paths = []
        elif name == "all":
            paths = [directory / f["name"] for f in self.files()]
        else:
            known = support.file_pattern.fullmatch(name) is not None
            paths = [directory / name] if known and (directory / name).is_file() else []
        if not paths:
            raise ConsoleError(404, "UNKNOWN_CAPTURE", f"no capture file {name!r}")
        return paths

    async def pcap(self, name: str) -> Response:
        """The capture file(s) as a pcap: exported in a worker thread to a temporary file that is unlinked
        as soon as it is open (nothing is left behind, whether the download ends or is dropped), then sent
        a chunk at a time, read in a worker thread.  One export at a time (409 EXPORT_RUNNING)."""
        paths = self.path_of(name)
        support = self.support()
        assert support is not None  # path_of found files
        try:
            self._exporting.acquire_nowait()
        except trio.WouldBlock:
            raise ConsoleError(409, "EXPORT_RUNNING", "a pcap export is running: try again when it is done") from None
        try:
            handle = await trio.to_thread.run_sync(_export_to_unlinked_file, support, paths)
        except BaseException:
            self._exporting.release()
            raise
        download = (name if name != "all" else "capture").removesuffix(".mkcap") + ".pcap"
        size = os.fstat(handle.fileno()).st_size

        async def chunks() -> Any:
            try:
                while chunk := await trio.to_thread.run_sync(handle.read, EXPORT_CHUNK):
                    yield chunk
            finally:
                handle.close()
                self._exporting.release()

        return StreamingResponse(chunks(), media_type="application/vnd.tcpdump.pcap", headers={
            "Content-Disposition": f'attachment; filename="{download}"', "Content-Length": str(size)})

    def analyze(self, jobs: list[str] | None = None) -> None:
        """Start ``minikafka analyze`` of the capture directory (``jobs``: only those analysis jobs)."""
        if not pyspark_available():
            raise ConsoleError(409, "PYSPARK_NOT_INSTALLED",
                               "the analysis needs pyspark (pip install 'minikafka[analysis]')")
        if self.analysis is not None and self.analysis.state == "running":
            raise ConsoleError(409, "ANALYSIS_RUNNING", "an analysis is running: wait for it to finish")
        files = self.files()
        if not files:
            raise ConsoleError(409, "NO_CAPTURE", "nothing captured yet")
        if self.analysis is not None:  # the previous report goes (in a worker thread: it may be large)
            trio.lowlevel.spawn_system_task(trio.to_thread.run_sync, partial(
                shutil.rmtree, self.analysis.out_dir, ignore_errors=True), name="console-analysis-cleanup")
        run = self.analysis = AnalysisRun(Path(tempfile.mkdtemp(prefix="minikafka-analysis-")),
                                          self.target.clock.time())
        command = [sys.executable, "-m", "minikafka", "analyze", str(self.directory()), "--out", str(run.out_dir),
                   "--no-progress", *(["--jobs", ",".join(jobs)] if jobs else [])]
        trio.lowlevel.spawn_system_task(self._run, run, command, name="console-analysis")

    async def _run(self, run: AnalysisRun, command: list[str]) -> None:
        """The subprocess, to its end (killed if the broker's loop ends first); never raises."""
        try:
            result = await self._process(command, run)
            run.returncode = result
            run.state = "done" if result == 0 else "failed"
        except BaseException as exc:  # noqa: BLE001 - a system task must not raise (cancelled at shutdown)
            run.state = "failed"
            run.output += f"\n{type(exc).__name__}: {exc}"
            if not isinstance(exc, Exception):
                raise
        finally:
            run.finished = self.target.clock.time()

    @staticmethod
    async def _process(command: list[str], run: AnalysisRun) -> int:
        """Run ``command``, keeping the tail of its output in ``run``; its exit status."""
        proc = await trio.lowlevel.open_process(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                                stdin=subprocess.DEVNULL)
        try:
            assert proc.stdout is not None
            async for chunk in proc.stdout:
                run.output = (run.output + chunk.decode("utf-8", "replace"))[-OUTPUT_TAIL * 4:]
            return await proc.wait()
        finally:
            if proc.returncode is None:
                proc.kill()
                with trio.CancelScope(shield=True):
                    await proc.wait()

    def report(self) -> Response:
        """The analysis' report.html, streamed from its file (read in worker threads), in a sandbox: it is
        built from captured client data, so it runs as an origin of its own, not as the console."""
        if self.analysis is None or not (self.analysis.out_dir / "report.html").is_file():
            raise ConsoleError(404, "NO_REPORT", "no analysis report yet")
        return FileResponse(self.analysis.out_dir / "report.html", media_type="text/html", headers={
            "Content-Security-Policy": "sandbox allow-scripts", "X-Content-Type-Options": "nosniff"})


def _export_to_unlinked_file(support: CaptureSupport, paths: list[Path]) -> Any:
    """``paths`` exported as one pcap to a temporary file, returned open for reading and already unlinked."""
    fd, tmp = tempfile.mkstemp(prefix="minikafka-", suffix=".pcap")
    os.close(fd)
    try:
        support.export_pcap(paths, tmp)
        return open(tmp, "rb")  # noqa: SIM115 - closed by the response's stream
    finally:
        os.unlink(tmp)


def routes(ctx: ConsoleContext) -> list[BaseRoute]:
    control = CaptureControl(ctx.target)

    def describe(request: Request) -> None:
        ctx.require(request, AclOperation.DESCRIBE, ResourceType.CLUSTER, CLUSTER_NAME)

    def alter(request: Request) -> None:
        ctx.require(request, AclOperation.ALTER, ResourceType.CLUSTER, CLUSTER_NAME)

    async def status(request: Request) -> Any:
        describe(request)
        return control.status()

    async def start(request: Request) -> Any:
        alter(request)
        await control.start()
        return control.status()

    async def stop(request: Request) -> Any:
        alter(request)
        await control.stop()
        return control.status()

    async def pcap(request: Request) -> Any:
        describe(request)
        return await control.pcap(request.path_params["name"])

    async def analyze(request: Request) -> Any:
        alter(request)
        jobs = (await read_json(request)).get("jobs") if has_body(request) else None
        if jobs is not None and not (isinstance(jobs, list) and jobs
                                     and all(isinstance(j, str) and j.isidentifier() for j in jobs)):
            raise ConsoleError(400, "INVALID_REQUEST", '"jobs" must be a list of analysis job names')
        control.analyze(jobs)
        return control.status()

    async def report(request: Request) -> Any:
        describe(request)
        return control.report()

    return [Route("/console/api/captures", api(ctx, status), methods=["GET"]),
            Route("/console/api/captures/start", api(ctx, start), methods=["POST"]),
            Route("/console/api/captures/stop", api(ctx, stop), methods=["POST"]),
            Route("/console/api/captures/files/{name}/pcap", api(ctx, pcap), methods=["GET"]),
            Route("/console/api/captures/analyze", api(ctx, analyze), methods=["POST"]),
            Route("/console/api/captures/report", api(ctx, report), methods=["GET"])]
