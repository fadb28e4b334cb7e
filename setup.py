"""The compiled parts: three on the broker's produce path, five on its fetch path and one in its log
cleaner, each with a Python counterpart that tests hold it equal to and that runs where they are not
built (protocol/_batch_scan.c, the check of incoming batches; protocol/_produce_read.c, a Produce
request in, and protocol/_produce_write.c, its usual answer out; protocol/_frames.c, a connection's
whole request frames out of what it read;
protocol/_fetch_read.c and _fetch_write.c, a consumer's Fetch request in and
the Fetch answer's headers out; broker/_file_send.c, the loop writing an answer's bytes and file
ranges into the socket, the pieces it writes and the answer's FileRegions where their pages are cached;
broker/log/_batch_read.c, a consumer's read of a segment on from where the last one stopped, the
open-file budget's pin and unpin on their common path and the release of an answer's regions;
broker/handlers/_fetch_reuse.c, a sessionless consumer's Fetch answered from what its connection kept;
protocol/_record_spans.c, where a batch's records lie and their keys), the Spark reader's
record decoder (pipeline/_recordcols.c) and the Spark writer's record encoder (pipeline/_recordenc.c).
They are optional: without a C compiler the install goes on without them (`make run` needs none; the
Spark reader and writer then say they are not built; `make test` installs gcc and its tests fail when
one is missing). Everything else about the package is in pyproject.toml."""

from setuptools import Extension, setup

setup(ext_modules=[
    Extension("protocol._batch_scan", ["protocol/_batch_scan.c"], extra_compile_args=["-O2"], optional=True),
    Extension("protocol._produce_read", ["protocol/_produce_read.c"], depends=["protocol/_request_objects.h"],
              extra_compile_args=["-O2"], optional=True),
    Extension("protocol._frames", ["protocol/_frames.c"], extra_compile_args=["-O2"], optional=True),
    Extension("protocol._fetch_read", ["protocol/_fetch_read.c"], depends=["protocol/_request_objects.h"],
              extra_compile_args=["-O2"], optional=True),
    Extension("protocol._fetch_write", ["protocol/_fetch_write.c"], depends=["protocol/_response_bytes.h"],
              extra_compile_args=["-O2"], optional=True),
    Extension("protocol._produce_write", ["protocol/_produce_write.c"], depends=["protocol/_response_bytes.h"],
              extra_compile_args=["-O2"], optional=True),
    Extension("broker._file_send", ["broker/_file_send.c"], extra_compile_args=["-O2"], optional=True),
    Extension("broker.log._batch_read", ["broker/log/_batch_read.c"], extra_compile_args=["-O2"], optional=True),
    Extension("broker.handlers._fetch_reuse", ["broker/handlers/_fetch_reuse.c"], extra_compile_args=["-O2"],
              optional=True),
    Extension("broker.metrics._error_counts", ["broker/metrics/_error_counts.c"], extra_compile_args=["-O2"],
              optional=True),
    Extension("protocol._record_spans", ["protocol/_record_spans.c"], extra_compile_args=["-O2"], optional=True),
    Extension("pipeline._recordcols", ["pipeline/_recordcols.c"], extra_compile_args=["-O2"], optional=True),
    Extension("pipeline._recordenc", ["pipeline/_recordenc.c"], extra_compile_args=["-O2"], optional=True),
])
