"""The pure parts of the `ebb` admin commands: properties files, timestamps, config lists, tables, progress."""

from __future__ import annotations

import io

import pytest

from client.cli.common import BadInput, parse_key_values, parse_timestamp, split_config_list
from client.cli.output import Elapsed, Progress, render_table
from client.cli.properties import client_settings
from client.java_properties import PropertiesError, parse_properties


def test_properties_separators_comments_and_continuations():
    text = (
        "# a comment\n"
        "! another\n"
        "\n"
        "client.id=plain\n"
        "request.timeout.ms : 5000\n"
        "retry.backoff.ms 250\n"
        "   bootstrap.servers = a:1,\\\n"
        "                       b:2\n"
        "key\\=with\\:seps=v\\tx\\u0041\n"
        "empty=\n"
        "bare\n"
    )
    assert parse_properties(text) == {
        "client.id": "plain", "request.timeout.ms": "5000", "retry.backoff.ms": "250",
        "bootstrap.servers": "a:1,b:2", "key=with:seps": "v\txA", "empty": "", "bare": "",
    }
    assert parse_properties("a=ends with an escaped backslash\\\\\nb=2") == {
        "a": "ends with an escaped backslash\\", "b": "2"}
    with pytest.raises(PropertiesError, match="line 1"):
        parse_properties("a=\\u00zz")


def test_client_settings_map_refuse_and_warn():
    settings = client_settings({"client.id": "me", "request.timeout.ms": "5000",
                                "socket.connection.setup.timeout.ms": "700", "retry.backoff.ms": "50",
                                "retry.backoff.max.ms": "500", "bootstrap.servers": "h:1",
                                "security.protocol": "plaintext", "linger.ms": "5"})
    assert settings.cluster_options == {"client_id": "me", "request_timeout_ms": 5000, "connect_timeout_ms": 700,
                                        "retry_backoff_ms": 50, "retry_backoff_max_ms": 500}
    assert settings.bootstrap_servers == "h:1"
    assert settings.warnings == ["linger.ms is not used by ebb's client; ignored"]
    for props, refusal in (({"security.protocol": "SASL_SSL"}, "sasl.mechanism is not set"),
                           ({"ssl.truststore.location": "/x"}, "ssl.truststore.location is set but"),
                           ({"sasl.jaas.config": "..."}, "sasl.jaas.config is set but"),
                           ({"ssl.cipher.suites": "x"}, "ssl.cipher.suites is not supported")):
        with pytest.raises(PropertiesError, match=refusal):
            client_settings(props)
    with pytest.raises(PropertiesError, match="must be > 0"):
        client_settings({"request.timeout.ms": "0"})
    with pytest.raises(PropertiesError, match="integer"):
        client_settings({"request.timeout.ms": "5s"})


@pytest.mark.parametrize(("text", "ms"), [
    ("0", 0),
    ("1714564800000", 1714564800000),
    ("2024-05-01T12:00:00Z", 1714564800000),
    ("2024-05-01T14:00:00+02:00", 1714564800000),
    ("2024-05-01T12:00:00.123Z", 1714564800123),
    ("2024-05-01T12:00:00.123999+00:00", 1714564800123),  # below a millisecond rounds down
    ("2024-05-01 12:00:00+00:00", 1714564800000),
])
def test_timestamps(text, ms):
    assert parse_timestamp(text, "--t") == ms


@pytest.mark.parametrize(("text", "message"), [
    ("-1", ">= 0"),
    ("yesterday", "not a timestamp"),
    ("2024-05-01T12:00:00", "no time zone"),
    ("2024-05-01", "no time zone"),
    ("1969-12-31T23:59:59Z", "before the epoch"),
])
def test_bad_timestamps(text, message):
    with pytest.raises(BadInput, match=message):
        parse_timestamp(text, "--t")


def test_config_lists():
    assert parse_key_values("a=1, b = 2 ,c=[x,y],d=", "--c") == {"a": "1", "b": "2", "c": "x,y", "d": ""}
    assert split_config_list("a,b", "--d") == ["a", "b"]
    for text, message in [("a", "not key=value"), ("=1", "not key=value"), ("a=1,a=2", "given twice"),
                          ("a=[1", "unbalanced '\\['"), ("a=1]", "unbalanced '\\]'"), ("a=1,,b=2", "empty entry")]:
        with pytest.raises(BadInput, match=message):
            parse_key_values(text, "--c")


def test_table_aligns_columns():
    assert render_table(("A", "LONGER"), [("xxxx", 1), (None, [1, 2])]) == "A     LONGER\nxxxx  1\n-     1,2"


class FakeTerminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_only_on_a_terminal_with_many_items():
    terminal = FakeTerminal()
    with Progress(20, "deleting", stream=terminal) as progress:
        progress.advance(10)
        progress.advance(10)
    assert "deleting [" in terminal.getvalue() and "20/20 partitions" in terminal.getvalue()
    assert terminal.getvalue().endswith("\r\x1b[K")

    piped = io.StringIO()
    with Progress(20, "deleting", stream=piped) as progress:
        progress.advance(20)
    assert piped.getvalue() == ""

    few = FakeTerminal()
    with Progress(3, "deleting", stream=few) as progress:
        progress.advance(3)
    assert few.getvalue() == ""


async def test_elapsed_time_only_on_a_terminal_and_erased_after():
    async def step() -> str:
        return "answer"

    terminal = FakeTerminal()
    assert await Elapsed("deleting", stream=terminal).run(step()) == "answer"
    assert terminal.getvalue() == "\rdeleting, 0 s\r\x1b[K"
    for stream, enabled in ((io.StringIO(), True), (FakeTerminal(), False)):
        assert await Elapsed("deleting", stream=stream, enabled=enabled).run(step()) == "answer"
        assert stream.getvalue() == ""

