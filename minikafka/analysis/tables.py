"""Loading a capture's tables as DataFrames, with time columns and topic names resolved.

``load_tables(spark, paths)`` reads the ``requests``, ``partitions`` and
``topics`` tables through the ``minikafka`` data source and adds
``receive_ts``/``send_ts`` timestamps; Fetch v13+ partitions, which carry only
topic ids, get their names from the Metadata/CreateTopics responses anywhere
in the capture (a task only knows the names its own split saw).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .session import register


@dataclass
class Tables:
    """The three decoded tables of one capture."""

    requests: Any
    partitions: Any
    topics: Any

    def cache(self) -> "Tables":
        self.requests = self.requests.cache()
        self.partitions = self.partitions.cache()
        self.topics = self.topics.cache()
        return self


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


def load_tables(spark: Any, paths: str | list[str], **options: Any) -> Tables:
    """The ``requests``, ``partitions`` and ``topics`` tables of the captures/pcaps at ``paths``."""
    from pyspark.sql import functions as F

    requests = _with_times(read_table(spark, paths, "requests", **options))
    topics = read_table(spark, paths, "topics", **options).groupBy("topic_id").agg(
        F.first("topic", ignorenulls=True).alias("topic_name"))
    parts = _with_times(read_table(spark, paths, "partitions", **options))
    parts = (parts.join(F.broadcast(topics), on="topic_id", how="left")
             .withColumn("topic", F.coalesce(F.col("topic"), F.col("topic_name"), F.col("topic_id")))
             .drop("topic_name"))
    return Tables(requests, parts, topics.withColumnRenamed("topic_name", "topic"))
