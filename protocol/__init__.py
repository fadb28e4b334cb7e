"""The Kafka wire protocol: bytes to messages and back. No sockets, no disk, no asyncio; nothing here
imports broker/ or client/ (docs/architecture.md, docs/protocol.md).

Messages: specs.py (schemas/*.json loaded and checked) -> codec.py (one compiled struct per message
and version) -> messages.py (the classes and APIS; typed by _messages.pyi, which stubs.py writes);
framing.py (size prefix, request and response headers); wire.py and varint.py (the primitives);
errors.py (ErrorCode, and CodedError, the one base of errors carrying (code, message)); enums.py
(Kafka's enums that travel as numbers, defined once).

The fast paths: fastpath.py (Produce in and its answer out, Fetch out, record data never copied) and
fetch_request.py (a consumer's Fetch request in); _produce_read.c compiles the Produce walk,
_fetch_read.c and _fetch_write.c the Fetch request's read and the Fetch answer's headers.

Record batches: records.py (the one module they are imported from: the view, the walk, building)
over batch_header.py (the header layout); record_format.py (the records inside a batch),
control_records.py (a control batch's record), compression.py (the four codecs); _batch_scan.c and
_record_spans.c are their compiled twins.
"""
