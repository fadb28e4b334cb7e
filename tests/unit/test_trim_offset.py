"""Which offset `retention.committed.groups` trims to (broker/group/trim.py); the broker side is in
tests/broker/test_trim_committed.py."""

import pytest

from broker.group.trim import trim_offset


@pytest.mark.parametrize(("groups", "committed", "live", "expected"), [
    ((), {"a": 5}, (), None),                         # not configured
    (("*",), {}, (), None),                           # nobody committed
    (("*",), {"a": 5, "b": 3}, (), 3),                # the slowest group
    (("*",), {"a": 5, "b": 3}, ("a", "b"), 3),        # live groups that committed count as they are
    (("*",), {"a": 5}, ("a", "reader"), None),        # a live reader without a commit holds it back
    (("a", "b"), {"a": 5}, (), None),                 # a named group without a commit holds it back
    (("a", "b"), {"a": 5, "b": 7, "c": 1}, (), 5),    # groups not named do not count
    (("a",), {"a": 0}, ("x",), 0),                    # live readers matter only for '*'
])
def test_trim_offset(groups, committed, live, expected):
    assert trim_offset(groups, committed, live) == expected
