"""The Spark session the analysis jobs run on: local by default, the submitter's under spark-submit.

``spark_session()`` returns the active session when there is one (``spark-submit``
created it, with whatever ``--master`` the user gave), else builds a local one
(``local[*]`` unless ``master`` says otherwise).  Either way the ``minikafka``
data source is registered.  Executors run the same Python as the driver
(``PYSPARK_PYTHON`` defaults to ``sys.executable``), so they decode with this
installation of minikafka, and their Python workers fork from
:mod:`minikafka.analysis.worker_daemon` (the decoder and pandas already imported);
on a real cluster, install minikafka on the workers (or ship it with ``--py-files``).
"""

from __future__ import annotations

import logging
import os
import re
import sys
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

DEFAULT_CONF = {
    "spark.ui.enabled": "false",
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.shuffle.partitions": "8",
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    "spark.driver.memory": "2g",
    "spark.ui.showConsoleProgress": "false",
    # PySpark's call-site capture for error messages costs a few JVM round trips per column function; the
    # jobs build hundreds of columns.
    "spark.python.sql.dataFrameDebugging.enabled": "false",
    # Python workers forked with pandas, pyarrow and the decoder already imported.
    "spark.python.daemon.module": "minikafka.analysis.worker_daemon",
    # Spark keeps one worker daemon per distinct worker environment, and its runners for co-grouped and
    # grouped pandas functions do not agree on this variable (Spark 4.3: the first sets it, the second
    # not): set for every Python function, the sessions and quotas replays fork from ONE daemon (a second
    # one costs its imports again, some 3 s of CPU on 2 cores).
    "spark.executorEnv.SPARK_SIMPLIFIED_TRACEBACK": "1",
}

#: Driver JVM options for a short analysis (``spark_session(short=True)``): the C1 compiler only (a run of
#: seconds never earns back C2's compilations), the serial collector (a small heap, few cores), a young
#: generation that starts large (a run allocates gigabytes that die young: some 20 young collections instead
#: of 60) and a metaspace that does not force a full collection as Spark's classes load.
SHORT_RUN_JVM_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC -Xms1g -Xmn400m -XX:MetaspaceSize=256m"
#: Spark settings for a short analysis: memory pages of 1 MiB (Spark sizes them from the heap and cores, some
#: 16 MiB here, and every sort and aggregation of a small query allocates and zeroes at least one).
SHORT_RUN_CONF = {"spark.buffer.pageSize": "1m"}


def local_conf(master: str) -> dict[str, str]:
    """Settings for a ``local[N]`` master: as many shuffle partitions as cores (the results are aggregates;
    more partitions than cores only add tasks)."""
    m = re.fullmatch(r"local(?:\[(\*|\d+)(?:,\d+)?\])?", master.strip())
    if m is None:
        return {}
    n = m.group(1)
    cores = 1 if n is None and master.strip() == "local" else (os.cpu_count() or 1) if n in (None, "*") else int(n)
    return {"spark.sql.shuffle.partitions": str(max(1, cores))}


def _prepare_env() -> None:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")


#: Where :func:`class_data_sharing` keeps its archives, unless ``MINIKAFKA_SPARK_CDS`` names another directory
#: (or is ``off``).
CDS_DIR = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "minikafka" / "spark-cds"
#: Unified-logging settings that keep the JVM's class-data-sharing warnings (classes it cannot archive,
#: printed on stdout) out of the command's output; a JVM without these options starts without them.
_CDS_QUIET = "-Xlog:cds=off -Xlog:cds+dynamic=off -XX:+IgnoreUnrecognizedVMOptions"


def _cds_dir() -> Path | None:
    chosen = os.environ.get("MINIKAFKA_SPARK_CDS", "")
    if chosen.lower() in ("off", "0", "false", "no"):
        return None
    return Path(chosen) if chosen else CDS_DIR


def _cds_key() -> str:
    """What an archive is only valid for: this PySpark's jars, the ``java`` that runs them, the JVM options."""
    import hashlib
    import shutil

    import pyspark

    java = os.path.join(os.environ["JAVA_HOME"], "bin", "java") if os.environ.get("JAVA_HOME") else shutil.which("java")
    jars = Path(pyspark.__file__).parent / "jars"
    parts = [pyspark.__version__, SHORT_RUN_JVM_OPTIONS, str(jars)]
    for path in (java and os.path.realpath(java), jars):
        if path and os.path.exists(path):
            st = os.stat(path)
            parts.append(f"{path}:{st.st_size}:{st.st_mtime_ns}")
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]


def class_data_sharing() -> str:
    """JVM options for a driver JVM to start from a class-data-sharing archive of Spark's classes, or to write
    one as it exits (JDK 13+ dynamic archives; the JVM checks an archive against its class path and ignores
    one that does not match).  A short analysis spends much of its CPU loading and verifying the thousands of
    classes Spark uses; from the archive the JVM maps them ready-verified (measured on 2 cores: session start
    7 -> 4 s of CPU).  The first run writes the archive (some 170 MB, in :data:`CDS_DIR`) when its JVM exits, to
    a name of its own; a later run adopts it once that JVM is gone.  "" when ``MINIKAFKA_SPARK_CDS`` is
    ``off``, or the directory cannot be written or has a space in its path (JVM options are split at spaces)."""
    directory = _cds_dir()
    if directory is None or " " in str(directory):
        return ""
    try:
        key = _cds_key()
        directory.mkdir(parents=True, exist_ok=True)
        archive = directory / f"spark-{key}.jsa"
        _adopt_written(directory, archive)
        if archive.is_file():
            return f"-XX:SharedArchiveFile={archive} {_CDS_QUIET}"
        pending = directory / f".spark-{key}.{os.getpid()}-{os.urandom(4).hex()}.jsa"
        _PENDING.append(pending)
        return f"-XX:ArchiveClassesAtExit={pending} {_CDS_QUIET}"
    except OSError as exc:
        log.debug("no class-data-sharing archive: %s", exc)
        return ""


#: Archives this process's driver JVM is to write as it exits (see :func:`note_driver_jvm`).
_PENDING: list[Path] = []


def note_driver_jvm(pid: int | None) -> None:
    """Record the pid of the driver JVM that writes a pending archive (beside it), so that a later run knows
    when it is complete: the JVM writes it as it exits, after this process (None: no JVM of ours)."""
    while _PENDING:
        pending = _PENDING.pop()
        try:
            if pid is None:
                pending.unlink(missing_ok=True)
            else:
                pending.with_suffix(".pid").write_text(str(pid), encoding="ascii")
        except OSError as exc:
            log.debug("class-data-sharing archive %s: %s", pending, exc)


def _adopt_written(directory: Path, archive: Path) -> None:
    """Rename into place an archive a finished JVM wrote for ``archive``; remove what dead JVMs left."""
    for pidfile in directory.glob(f".{archive.stem}.*.pid"):
        pending = pidfile.with_suffix(".jsa")
        try:
            pid = int(pidfile.read_text(encoding="ascii").strip())
            if _alive(pid):
                continue
            if pending.is_file() and pending.stat().st_size > 0 and not archive.exists():
                pending.replace(archive)
            pending.unlink(missing_ok=True)
            pidfile.unlink(missing_ok=True)
        except (OSError, ValueError):
            continue


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def session_settings(master: str | None, conf: dict[str, str] | None = None, short: bool = False) -> dict[str, str]:
    """The settings a new session gets: :data:`DEFAULT_CONF`, those of a ``local[N]`` master, ``conf``, and for
    a ``short`` run :data:`SHORT_RUN_CONF`, and :data:`SHORT_RUN_JVM_OPTIONS` and :func:`class_data_sharing`
    for the driver (unless ``conf`` sets its JVM options)."""
    settings = {**DEFAULT_CONF, **(SHORT_RUN_CONF if short else {}), **(local_conf(master) if master else {}),
                **(conf or {})}
    if short and "spark.driver.extraJavaOptions" not in settings:
        settings["spark.driver.extraJavaOptions"] = " ".join(filter(None, (SHORT_RUN_JVM_OPTIONS,
                                                                           class_data_sharing())))
    return settings


def new_session_master(master: str | None = None) -> str | None:
    """The master :func:`spark_session` gives a new session: ``master``, else ``MINIKAFKA_SPARK_MASTER``, else
    ``local[*]``; None under spark-submit without ``master`` (its JVM already runs with the user's
    ``--master``, named by ``PYSPARK_GATEWAY_PORT``)."""
    if master or "PYSPARK_GATEWAY_PORT" not in os.environ:
        return master or os.environ.get("MINIKAFKA_SPARK_MASTER", "local[*]")
    return None


def spark_session(master: str | None = None, app_name: str = "minikafka", conf: dict[str, str] | None = None,
                  short: bool = False, register_source: bool = True) -> Any:
    """The active SparkSession, or a new one (``local[*]`` by default) with :func:`session_settings`; with the
    data source registered (unless ``register_source`` is false: registering starts a Python worker to look
    up Spark's other Python data sources, which a capture decoded in the driver does without; reading a
    table registers it anyway).  ``short``: the new session is for a run of seconds."""
    _prepare_env()
    from pyspark.sql import SparkSession

    spark = SparkSession.getActiveSession()
    if spark is None:
        builder = SparkSession.builder.appName(app_name)
        chosen = new_session_master(master)
        if chosen is not None:
            builder = builder.master(chosen)
        for k, v in session_settings(chosen, conf, short).items():
            builder = builder.config(k, v)
        spark = builder.getOrCreate()
        spark.sparkContext.setLogLevel("WARN")
        proc = getattr(getattr(spark.sparkContext, "_gateway", None), "proc", None)
        note_driver_jvm(None if proc is None else proc.pid)
    if register_source:
        register(spark)
    return spark


def register(spark: Any) -> None:
    """Register the ``minikafka`` Python data source with ``spark`` (idempotent)."""
    if getattr(spark, "_minikafka_registered", False):
        return
    from .datasource import MinikafkaDataSource

    spark.dataSource.register(MinikafkaDataSource)
    spark._minikafka_registered = True
