"""Ebb's data pipeline: a PySpark data source for Ebb topics (format "ebb") and jobs built on it.

    from pipeline import EbbDataSource, register
    register(spark)   # or spark.dataSource.register(EbbDataSource)

See docs/pipeline.md.
"""

from .options import EbbSourceError
from .source import EbbDataSource

__all__ = ["EbbDataSource", "EbbSourceError", "register"]


def register(spark) -> None:
    """Make format("ebb") known to a SparkSession (registration lasts for that session only)."""
    spark.dataSource.register(EbbDataSource)
