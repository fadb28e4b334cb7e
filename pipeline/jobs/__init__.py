"""Spark jobs on Ebb topics, each runnable as `python -m pipeline.jobs.<name> --help`."""
