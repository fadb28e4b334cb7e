"""LeaderEpochCache.end_offset_for answers as Kafka's LeaderEpochFileCache.endOffsetFor does (the
differential test checks the same on the wire against Kafka itself)."""

import pytest

from broker.log.epoch import LeaderEpochCache

CACHE = [(2, 10), (4, 30), (7, 50)]  # (epoch, start offset); the log ends at 80


@pytest.mark.parametrize("asked, expected", [
    (7, (7, 80)),    # the latest epoch ends at the log end
    (4, (4, 50)),    # an older one where the next starts
    (5, (4, 50)),    # an epoch never seen, between two: under the largest below it
    (1, (1, 10)),    # below every epoch known: itself, ending where the first starts
    (9, (-1, -1)),   # above every epoch known: no end
    (-1, (-1, -1)),  # UNDEFINED
])
def test_end_offset_for(asked, expected):
    assert LeaderEpochCache(CACHE).end_offset_for(asked, 80) == expected


def test_an_empty_cache_knows_no_epoch():
    assert LeaderEpochCache().end_offset_for(0, 5) == (-1, -1)
