"""Loading a capture's tables as DataFrames, with time columns and topic names resolved.

``load_tables(spark, paths)`` reads the ``requests``, ``partitions`` and
``topics`` tables through the ``minikafka`` data source and adds
``receive_ts``/``send_ts`` timestamps; Fetch v13+ partitions, which carry only
topic ids, get their names from the Metadata/CreateTopics responses anywhere
in the capture (a task only knows the names its own split saw).

The three tables come from ONE read of the captures (the data source's ``all``
table: every record is decoded once for all three); :meth:`Tables.cache`
caches that read, so every job that runs on the cached tables scans memory,
and the captures are decoded once in all.  A capture of some 100k requests or
less on a local master is decoded in the driver instead (``decode_in="auto"``,
below :data:`DRIVER_DECODE_MAX_BYTES`): the three tables are handed to Spark as
Parquet files (Spark's cache is not built), and no Python worker is started for
its splits (on few cores, starting them and building the cache cost more than
decoding here).  :func:`decode_here` and :func:`stage_arrow` need no Spark
session, and :func:`staged_tables` reads what they staged, so that a caller can
decode and stage while its Spark session starts.
"""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .decode import _FETCH, ALL_KINDS, ALL_PREFIXES, COLUMNS
from .session import register

#: Inputs up to this many bytes (captures and pcaps together) are decoded in the driver when the master is
#: local (``decode_in="auto"``); larger ones by the data source, in parallel tasks.  (Measured on 2 cores: a
#: capture of 104k requests, 57 MB, decodes here in 6 s of CPU while the session starts, and the analysis
#: takes 24-29 s against 40-46 s with the data source's cached read; twice that capture, 114 MB, 35 s against
#: 46 s.)
DRIVER_DECODE_MAX_BYTES = 128 << 20


@dataclass
class Tables:
    """The three decoded tables of one capture (views of one read of it, ``source``)."""

    requests: Any
    partitions: Any
    topics: Any
    source: Any = field(default=None, repr=False)  # the ``all`` table the three are views of
    #: The capture's facts when known without a Spark query (decoded in the driver): see :func:`capture_facts`.
    facts: dict[str, Any] | None = None
    #: The directory of the Parquet files the tables are read from (decoded in the driver): removed by
    #: :meth:`unpersist`.
    staged: Path | None = None

    def cache(self) -> "Tables":
        """Cache the read the tables come from (one pass over the captures when first used), and resolve
        topic names against the (few) topics it found, collected once, instead of a join per query.  Tables
        staged in Parquet are left as they are: the files are their cache (Spark's vectorized reader scans
        them faster than it builds an in-memory copy)."""
        if self.staged is not None:
            return self
        if self.source is None:
            self.requests = self.requests.cache()
            self.partitions = self.partitions.cache()
            self.topics = self.topics.cache()
            return self
        self.source = self.source.cache()
        spark = self.source.sparkSession
        names = [tuple(r) for r in self.topics.collect()]  # the first action: decodes and caches everything
        self.topics = spark.createDataFrame(names, "topic_id string, topic string")
        self.partitions = _named(_table(self.source, "partitions"), self.topics)
        return self

    def empty(self) -> "Tables":
        """The same tables with no rows (``limit(0)``: Spark's optimizer turns every query over them into an
        empty local relation, or the row an aggregate of nothing gives, without scanning the capture)."""
        return Tables(self.requests.limit(0), self.partitions.limit(0), self.topics.limit(0), facts=self.facts)

    def unpersist(self) -> None:
        """Drop what :meth:`cache` cached."""
        for df in (self.source, self.requests, self.partitions, self.topics):
            if df is not None:
                df.unpersist()
        if self.staged is not None:
            shutil.rmtree(self.staged, ignore_errors=True)


def read_table(spark: Any, paths: str | list[str], table: str, **options: Any) -> Any:
    """One raw table of the data source."""
    register(spark)
    if not isinstance(paths, str):
        paths = ",".join(str(p) for p in paths)
    reader = spark.read.format("minikafka").option("table", table)
    for k, v in options.items():
        if v is not None:
            reader = reader.option(k, str(v))
    return reader.load(paths)


def _with_times(df: Any) -> Any:
    from pyspark.sql import functions as F

    return (df.withColumn("receive_ts", F.timestamp_micros(F.floor(F.col("receive_ns") / 1000).cast("long")))
              .withColumn("send_ts", F.timestamp_micros(F.floor(F.col("send_ns") / 1000).cast("long"))))


def _table(source: Any, table: str) -> Any:
    """One table's rows and columns (names without their prefix) of the ``all`` table."""
    from pyspark.sql import functions as F

    prefix = ALL_PREFIXES[table]
    return (source.where(F.col("table") == F.lit(ALL_KINDS[table]))
            .select(*[F.col(prefix + name).alias(name) for name, _typ in COLUMNS[table]]))


def _named(parts: Any, topics: Any) -> Any:
    """``parts`` with topic names from ``topics`` (topic_id, topic) where the row has only an id."""
    from pyspark.sql import functions as F

    parts = _with_times(parts)
    return (parts.join(F.broadcast(topics.withColumnRenamed("topic", "topic_name")), on="topic_id", how="left")
            .withColumn("topic", F.coalesce(F.col("topic"), F.col("topic_name"), F.col("topic_id")))
            .drop("topic_name"))


def decodes_in_driver(spark: Any, paths: str | list[str], decode_in: str = "auto") -> bool:
    """Whether :func:`load_tables` decodes ``paths`` in the driver: ``decode_in`` "driver", "executors", or
    "auto" (a local master and at most :data:`DRIVER_DECODE_MAX_BYTES` of input)."""
    return master_decodes_in_driver(str(spark.sparkContext.master), paths, decode_in)


def master_decodes_in_driver(master: str, paths: str | list[str], decode_in: str = "auto") -> bool:
    """:func:`decodes_in_driver` for a session on ``master`` (one that may not be started yet)."""
    if decode_in not in ("auto", "driver", "executors"):
        raise ValueError(f"decode_in must be auto, driver or executors, not {decode_in!r}")
    if decode_in != "auto":
        return decode_in == "driver"
    if not master.startswith("local"):
        return False
    from .datasource import input_bytes

    size = input_bytes(paths)
    return size is not None and size <= DRIVER_DECODE_MAX_BYTES


def decode_here(paths: str | list[str], options: dict[str, Any] | None = None) -> dict[str, Any]:
    """The ``requests``, ``partitions`` and ``topics`` tables of ``paths`` decoded in this process, as Arrow
    tables (``options``: the data source's); no Spark session needed.  :func:`arrow_tables` makes them
    DataFrames."""
    from .datasource import decode_tables_here

    if not isinstance(paths, str):
        paths = ",".join(str(p) for p in paths)
    return decode_tables_here({**{k: str(v) for k, v in (options or {}).items() if v is not None}, "path": paths})


def _driver_tables(spark: Any, paths: str | list[str], options: dict[str, Any]) -> Tables:
    """The three tables decoded here and handed to Spark (topic names resolved here too)."""
    return arrow_tables(spark, decode_here(paths, options))


def arrow_tables(spark: Any, arrow: dict[str, Any], stage: bool | None = None) -> Tables:
    """The tables of :func:`decode_here`'s Arrow tables, handed to Spark (topic names resolved here).

    ``stage`` (default: on a local master) writes them as Parquet files in a temporary directory
    (:func:`stage_arrow`) for Spark to read (:func:`staged_tables`); :meth:`Tables.unpersist` removes the files.
    Spark scanning those files costs the jobs less than Spark building its in-memory cache of the rows (see
    :data:`DRIVER_DECODE_MAX_BYTES`).  Otherwise (a cluster's executors cannot read the driver's files) the
    tables go to Spark from memory, ``createDataFrame`` of the Arrow tables."""
    if stage is None:
        stage = str(spark.sparkContext.master).startswith("local")
    if stage:
        return staged_tables(spark, stage_arrow(arrow))
    names = _topic_names(arrow["topics"])
    topics = spark.createDataFrame(list(names.items()), "topic_id string, topic string")
    requests = _with_times(spark.createDataFrame(arrow["requests"]))
    return Tables(requests, _named(spark.createDataFrame(arrow["partitions"]), topics), topics,
                  facts=_arrow_facts(arrow["requests"]))


@dataclass
class StagedTables:
    """:func:`decode_here`'s tables written as Parquet files for Spark (:func:`stage_arrow`)."""

    directory: Path
    facts: dict[str, Any]
    #: The Arrow schema of each file, by table name: Spark reads the files with it instead of inferring it.
    schemas: dict[str, Any]


def _topic_names(topics: Any) -> dict[str, str | None]:
    """Each topic id's name (the first one known) in a ``topics`` Arrow table."""
    names: dict[str, str | None] = {}
    for topic_id, topic in zip(topics.column("topic_id").to_pylist(), topics.column("topic").to_pylist(),
                               strict=True):
        if names.get(topic_id) is None:
            names[topic_id] = topic
    return names


def stage_arrow(arrow: dict[str, Any]) -> StagedTables:
    """Write :func:`decode_here`'s tables as Parquet files in a new temporary directory, with their time columns
    added and topic names resolved as :func:`load_tables` does in Spark: no Spark session needed, so a caller
    can stage while its session starts.  :func:`staged_tables` reads them."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    names = _topic_names(arrow["topics"])
    files = {"requests": _arrow_with_times(arrow["requests"]),
             "partitions": _arrow_named(_arrow_with_times(arrow["partitions"]), names),
             "topics": pa.table({"topic_id": pa.array(list(names), pa.string()),
                                 "topic": pa.array(list(names.values()), pa.string())})}
    staged = Path(tempfile.mkdtemp(prefix="minikafka-tables-"))
    try:
        for name, table in files.items():
            pq.write_table(table, staged / f"{name}.parquet", compression="none")
    except BaseException:
        shutil.rmtree(staged, ignore_errors=True)
        raise
    return StagedTables(staged, _arrow_facts(arrow["requests"]), {n: t.schema for n, t in files.items()})


def staged_tables(spark: Any, staged: StagedTables) -> Tables:
    """The tables :func:`stage_arrow` wrote, read by ``spark`` (with their schemas: no file is opened to infer
    one); :meth:`Tables.unpersist` removes the files."""
    from pyspark.sql.pandas.types import from_arrow_schema

    try:
        frames = {name: spark.read.schema(from_arrow_schema(schema)).parquet(str(staged.directory / f"{name}.parquet"))
                  for name, schema in staged.schemas.items()}
    except BaseException:
        shutil.rmtree(staged.directory, ignore_errors=True)
        raise
    return Tables(frames["requests"], frames["partitions"], frames["topics"], facts=staged.facts,
                  staged=staged.directory)


def _arrow_with_times(table: Any) -> Any:
    """:func:`_with_times` of an Arrow table: ``receive_ts``/``send_ts`` appended (UTC microseconds, computed
    as Spark computes them there: ``floor(ns / 1000)`` in doubles)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    ts = pa.timestamp("us", tz="UTC")
    for name in ("receive", "send"):
        ns = table.column(f"{name}_ns")
        micros = pc.floor(pc.divide(ns.cast(pa.float64(), safe=False), 1000.0)).cast(pa.int64())
        table = table.append_column(f"{name}_ts", micros.cast(ts))
    return table


def _arrow_named(parts: Any, names: dict[str, str | None]) -> Any:
    """:func:`_named` of an Arrow table: ``topic_id`` first (as Spark's join puts its key), ``topic`` filled
    from ``names`` (then the id itself) where the row has only an id."""
    import pyarrow as pa

    def topic(name: str | None, topic_id: str | None) -> str | None:  # coalesce(topic, its id's name, the id)
        if name is not None or topic_id is None:
            return name
        found = names.get(topic_id)
        return found if found is not None else topic_id

    filled = [topic(n, i) for n, i in zip(parts.column("topic").to_pylist(), parts.column("topic_id").to_pylist(),
                                          strict=True)]
    parts = parts.set_column(parts.schema.get_field_index("topic"), "topic", pa.array(filled, pa.string()))
    order = ["topic_id"] + [c for c in parts.column_names if c != "topic_id"]
    return parts.select(order)


def _arrow_facts(requests: Any) -> dict[str, Any]:
    """:func:`capture_facts` of a requests table held as Arrow."""
    import pyarrow.compute as pc

    receive = requests.column("receive_ns")
    last = pc.max_element_wise(receive, pc.coalesce(requests.column("send_ns"), receive))
    pairs = requests.select(["broker_id", "connection_id"]).group_by(["broker_id", "connection_id"]).aggregate([])
    follower = pc.and_(pc.equal(requests.column("api_key"), _FETCH),
                       pc.greater_equal(pc.fill_null(requests.column("replica_id"), -1), 0))
    return {"requests": requests.num_rows, "decode_errors": pc.count(requests.column("decode_error")).as_py(),
            "connections": pairs.num_rows, "first_ns": pc.min(receive).as_py(), "last_ns": pc.max(last).as_py(),
            "api_keys": sorted(pc.unique(requests.column("api_key")).to_pylist()),
            "follower_fetches": pc.sum(follower.cast("int64")).as_py() or 0}


def capture_facts(tables: Tables) -> dict[str, Any]:
    """Requests, decode errors, connections (distinct broker and connection ids), the first and last
    nanosecond, the api keys present (``api_keys``, sorted) and the follower fetches (``follower_fetches``: Fetch
    requests with ``replica_id >= 0``) of the capture (a Spark query unless :attr:`Tables.facts` knows them)."""
    if tables.facts is not None:
        return dict(tables.facts)
    from pyspark.sql import functions as F

    follower = (F.col("api_key") == F.lit(_FETCH)) & (F.coalesce(F.col("replica_id"), F.lit(-1)) >= 0)
    row = tables.requests.agg(
        F.count(F.lit(1)).alias("requests"), F.count("decode_error").alias("decode_errors"),
        F.countDistinct("broker_id", "connection_id").alias("connections"),
        F.min("receive_ns").alias("first_ns"),
        F.max(F.greatest(F.col("receive_ns"), F.coalesce(F.col("send_ns"), F.col("receive_ns")))).alias("last_ns"),
        F.array_sort(F.collect_set("api_key")).alias("api_keys"),
        F.count(F.when(follower, 1)).alias("follower_fetches"),
    ).collect()[0]
    return row.asDict()


def load_tables(spark: Any, paths: str | list[str], *, decode_in: str = "auto", **options: Any) -> Tables:
    """The ``requests``, ``partitions`` and ``topics`` tables of the captures/pcaps at ``paths`` (``options``:
    the data source's; ``decode_in``: see :func:`decodes_in_driver`)."""
    from pyspark.sql import functions as F

    if decodes_in_driver(spark, paths, decode_in):
        return _driver_tables(spark, paths, options)
    source = read_table(spark, paths, "all", **options)
    requests = _with_times(_table(source, "requests"))
    topics = (_table(source, "topics").groupBy("topic_id")
              .agg(F.first("topic", ignorenulls=True).alias("topic")))
    return Tables(requests, _named(_table(source, "partitions"), topics), topics, source)
