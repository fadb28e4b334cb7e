"""The one compiled part: the Spark reader's record decoder (pipeline/_recordcols.c). Everything else
about the package is in pyproject.toml."""

from setuptools import Extension, setup

setup(ext_modules=[Extension("pipeline._recordcols", ["pipeline/_recordcols.c"], extra_compile_args=["-O2"])])
