"""Which `log.cleaner.*` broker settings Ebb's log cleaner can honour; the others stop start-up by name.
`log.cleaner.io.max.bytes.per.second` is honoured by cleaner_throttle.py."""

from __future__ import annotations

from broker.log.config import LogManagerConfig
from broker.log.offset_map import key_map_capacity

NO_IO_THROTTLE = 1.7976931348623157e308  # Kafka's default for log.cleaner.io.max.bytes.per.second


def cleaner_config_problem(config: LogManagerConfig) -> str | None:
    if config.cleaner_threads < 1:
        return f"log.cleaner.threads: {config.cleaner_threads} is below the minimum 1"
    if config.cleaner_io_buffer_size < 1:
        return f"log.cleaner.io.buffer.size: {config.cleaner_io_buffer_size} is below the minimum 1"
    if not 0.0 < config.cleaner_io_buffer_load_factor <= 1.0:
        return "log.cleaner.io.buffer.load.factor: must be above 0 and at most 1"
    if config.cleaner_backoff_ms < 0:
        return f"log.cleaner.backoff.ms: {config.cleaner_backoff_ms} is below the minimum 0"
    if not config.cleaner_io_max_bytes_per_second > 0:  # Kafka's DOUBLE has no bound; a rate of 0 never ends
        return "log.cleaner.io.max.bytes.per.second: must be above 0"
    if config.cleaner_enable and key_map_capacity(config.cleaner_dedupe_buffer_size, config.cleaner_threads,
                                                  config.cleaner_io_buffer_load_factor) < 1:
        return ("log.cleaner.dedupe.buffer.size: too small to hold a single key per cleaner thread; raise it "
                "or lower log.cleaner.threads")
    return None
