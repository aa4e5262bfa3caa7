"""Loading a capture's tables as DataFrames, with time columns and topic names resolved.

``load_tables(spark, paths)`` reads the ``requests``, ``partitions`` and
``topics`` tables through the ``minikafka`` data source and adds
``receive_ts``/``send_ts`` timestamps; Fetch v13+ partitions, which carry only
topic ids, get their names from the Metadata/CreateTopics responses anywhere
in the capture (a task only knows the names its own split saw).

The three tables come from ONE read of the captures (the data source's ``all``
table: every record is decoded once for all three); :meth:`Tables.cache`
caches that read, so every job that runs on the cached tables scans memory,
and the captures are decoded once in all.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .decode import ALL_KINDS, ALL_PREFIXES, COLUMNS
from .session import register


@dataclass
class Tables:
    """The three decoded tables of one capture (views of one read of it, ``source``)."""

    requests: Any
    partitions: Any
    topics: Any
    source: Any = field(default=None, repr=False)  # the ``all`` table the three are views of

    def cache(self) -> "Tables":
        """Cache the read the tables come from (one pass over the captures when first used), and resolve
        topic names against the (few) topics it found, collected once, instead of a join per query."""
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

    def unpersist(self) -> None:
        """Drop what :meth:`cache` cached."""
        for df in (self.source, self.requests, self.partitions, self.topics):
            if df is not None:
                df.unpersist()


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


def load_tables(spark: Any, paths: str | list[str], **options: Any) -> Tables:
    """The ``requests``, ``partitions`` and ``topics`` tables of the captures/pcaps at ``paths``."""
    from pyspark.sql import functions as F

    source = read_table(spark, paths, "all", **options)
    requests = _with_times(_table(source, "requests"))
    topics = (_table(source, "topics").groupBy("topic_id")
              .agg(F.first("topic", ignorenulls=True).alias("topic")))
    return Tables(requests, _named(_table(source, "partitions"), topics), topics, source)
