"""PySpark analysis of traffic captures: the ``minikafka`` data source, the tables, the jobs, the report.

Importing this package does not import PySpark; :func:`spark_session` and
:func:`load_tables` do.  ``minikafka analyze`` runs every job in
:mod:`minikafka.analysis.jobs` and writes Parquet/CSV tables and an HTML report.
"""

from .jobs import AnalysisOptions, Section
from .session import spark_session
from .tables import Tables, load_tables

__all__ = ["AnalysisOptions", "Section", "Tables", "load_tables", "spark_session"]
