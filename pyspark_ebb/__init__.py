"""Lets PySpark find format("ebb") without register(): it registers every installed top-level module
named pyspark_* that has a DefaultSource (a DataSource subclass) when a session starts."""

from pipeline.source import EbbDataSource as DefaultSource

__all__ = ["DefaultSource"]
