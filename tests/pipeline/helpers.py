"""Broker-side helpers for the pipeline tests, all through the project's own client."""

from __future__ import annotations

import asyncio

from client import EARLIEST, Admin, Consumer, ConsumerRecord, Producer


def create_topic(bootstrap: str, name: str, partitions: int = 1, configs: dict[str, str] | None = None) -> None:
    async def go():
        async with Admin(bootstrap) as admin:
            await admin.create_topic(name, num_partitions=partitions, configs=configs or {})
            await admin.wait_for_leaders(name)

    asyncio.run(go())


def produce(bootstrap: str, batches: dict[tuple[str, int], list], timestamp_ms: int | None = None) -> None:
    async def go():
        async with Producer(bootstrap, acks=-1) as producer:
            results = await producer.send_batches(batches, timestamp_ms=timestamp_ms)
            assert all(r.ok for r in results.values()), results

    asyncio.run(go())


def consume_all(bootstrap: str, topic: str) -> list[ConsumerRecord]:
    """Every record of every partition of `topic`, from the log start to the high watermark."""
    async def go():
        async with Admin(bootstrap) as admin:
            partitions = (await admin.describe_topics([topic]))[topic].partitions
            consumer = Consumer(admin.cluster)
            consumer.assign({(topic, p): EARLIEST for p in partitions})
            return await consumer.read_to_end(timeout_ms=20000)

    return asyncio.run(go())


def delete_records(bootstrap: str, offsets: dict[tuple[str, int], int]) -> None:
    async def go():
        async with Admin(bootstrap) as admin:
            results = (await admin.delete_records(offsets)).partition_results()
            assert all(r.ok for r in results.values()), results

    asyncio.run(go())


def read_options(bootstrap: str, **options) -> dict[str, str]:
    return {"kafka.bootstrap.servers": bootstrap, **{k: str(v) for k, v in options.items()}}


def read_batch(spark, bootstrap: str, **options):
    """A batch DataFrame over Ebb; option values may be given as non-strings."""
    return spark.read.format("ebb").options(**read_options(bootstrap, **options)).load()


def rows_by_offset(df) -> list[tuple]:
    """(topic, partition, offset, key, value) of every row, sorted."""
    return sorted((r.topic, r.partition, r.offset, r.key and bytes(r.key), r.value and bytes(r.value))
                  for r in df.collect())


def add_partitions(bootstrap: str, topic: str, total: int) -> None:
    """Grow a topic with CreatePartitions (through confluent-kafka: the project's client has no call for it)."""
    from confluent_kafka.admin import AdminClient, NewPartitions

    admin = AdminClient({"bootstrap.servers": bootstrap})  # must outlive the future
    admin.create_partitions([NewPartitions(topic, total)])[topic].result(timeout=30)
