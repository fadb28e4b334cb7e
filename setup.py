"""The compiled parts, each with a Python counterpart that tests hold it equal to: the broker's check
of incoming record batches (protocol/_batch_scan.c) and the Spark reader's record decoder
(pipeline/_recordcols.c). Everything else about the package is in pyproject.toml."""

from setuptools import Extension, setup

setup(ext_modules=[
    Extension("protocol._batch_scan", ["protocol/_batch_scan.c"], extra_compile_args=["-O2"]),
    Extension("pipeline._recordcols", ["pipeline/_recordcols.c"], extra_compile_args=["-O2"]),
])
