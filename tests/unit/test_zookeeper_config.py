"""The ZooKeeper broker properties (Kafka's names and defaults) and the session file a broker keeps to
end its own session after a crash."""

import stat

import pytest

from broker.cluster.zookeeper import Session, load_session, save_session
from broker.config import ConfigError, known_broker_properties, load_config


def test_no_zookeeper_by_default_and_kafkas_timeouts():
    config = load_config()
    assert config.zookeeper_connect is None
    assert config.zookeeper_session_timeout_ms == 18000
    assert config.zookeeper_connection_timeout_ms == 18000  # Kafka: null, so the session timeout
    known = known_broker_properties(config)
    assert known["zookeeper.connect"] is None and known["zookeeper.connection.timeout.ms"] is None
    assert known["zookeeper.session.timeout.ms"] == "18000"


def test_connection_timeout_follows_the_session_timeout_unless_set():
    config = load_config(None, ["zookeeper.connect=zk1:2181,zk2:2182/ebb/prod", "zookeeper.session.timeout.ms=6000"])
    assert config.zookeeper_connect == "zk1:2181,zk2:2182/ebb/prod"
    assert (config.zookeeper_session_timeout_ms, config.zookeeper_connection_timeout_ms) == (6000, 6000)
    config = load_config(None, ["zookeeper.connect=zk1:2181", "zookeeper.connection.timeout.ms=2500"])
    assert (config.zookeeper_session_timeout_ms, config.zookeeper_connection_timeout_ms) == (18000, 2500)
    assert known_broker_properties(config)["zookeeper.connection.timeout.ms"] == "2500"
    assert load_config(None, ["zookeeper.connect=zk1:2181/"]).zookeeper_connect == "zk1:2181"


@pytest.mark.parametrize("override, named", [
    ("zookeeper.connect=zk1", "zookeeper.connect"),
    ("zookeeper.connect=zk1:2181,:2182", "zookeeper.connect"),
    ("zookeeper.connect=zk1:99999", "zookeeper.connect"),
    ("zookeeper.connect=zk1:2181/ebb/", "zookeeper.connect"),
    ("zookeeper.session.timeout.ms=soon", "zookeeper.session.timeout.ms"),
    ("zookeeper.connection.timeout.ms=0", "zookeeper.connection.timeout.ms"),
])
def test_bad_values_name_the_property(override, named):
    with pytest.raises(ConfigError, match=named):
        load_config(None, [override])


async def test_the_session_file_round_trips_and_is_private(tmp_path):
    path = tmp_path / "zookeeper-session"
    assert load_session(path) is None
    session = Session(0x10000BC0ADA000C, bytes(range(16)))
    await save_session(path, session)
    assert load_session(path) == session
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    path.write_text('{"version": 99}')
    assert load_session(path) is None  # an unknown format is ignored, not trusted
    path.write_text("not json")
    assert load_session(path) is None
