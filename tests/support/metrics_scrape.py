"""Scrape a broker's /metrics and read samples, with prometheus_client's own text parser.

    samples = scrape(url)
    value(samples, "kafka_server_brokertopicmetrics_bytesin_total", topic="t")
"""

from __future__ import annotations

import urllib.request

from prometheus_client.parser import text_string_to_metric_families

Samples = dict[tuple[str, frozenset], float]


def scrape(url: str, timeout: float = 10.0) -> Samples:
    with urllib.request.urlopen(url, timeout=timeout) as answer:
        text = answer.read().decode()
    samples: Samples = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            samples[(sample.name, frozenset(sample.labels.items()))] = sample.value
    return samples


def value(samples: Samples, name: str, **labels: str) -> float | None:
    """The sample with exactly these labels, or None when the broker exports none."""
    return samples.get((name, frozenset(labels.items())))


def series_names(samples: Samples) -> set[str]:
    return {name for name, _ in samples}
