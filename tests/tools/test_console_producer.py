"""`minikafka console-producer` (kafka-console-producer.sh): stdin lines with keys and headers become records."""

from __future__ import annotations

import io
import sys

import pytest
from tools_helpers import consume, create_topic, run_cli, run_subprocess

from minikafka.testing import BrokerThread
from minikafka.tools.common import ToolError
from minikafka.tools.console_producer import LineReader


def test_keys_and_headers_from_stdin_round_trip_through_console_consumer(broker_thread: BrokerThread,
                                                                        capsys) -> None:
    b = broker_thread.bootstrap
    create_topic(b, "lines", 1)
    stdin = b"trace:t1,empty:\tk1:first\n\tk2:second:with:colons\nnoheader:null-key-line\r\n"
    r = run_subprocess("console-producer", "--bootstrap-server", b, "--topic", "lines",
                       "--property", "parse.key=true", "key.separator=:", "--property", "parse.headers=true",
                       "ignore.error=true", stdin=stdin)
    assert (r.rc, r.err) == (0, "")

    got = consume(b, "lines", [0], 3)
    assert [(rec.key, rec.value, rec.headers) for rec in got] == [
        (b"k1", b"first", [("trace", b"t1"), ("empty", b"")]),
        (b"k2", b"second:with:colons", []),
        (b"noheader", b"null-key-line", []),
    ]

    r = run_cli(capsys, "console-consumer", "--bootstrap-server", b, "--topic", "lines", "--from-beginning",
                "--max-messages", "3", "--property", "print.key=true", "print.headers=true")
    assert r.rc == 0
    assert r.lines == ["trace:t1,empty:\tk1\tfirst", "NO_HEADERS\tk2\tsecond:with:colons",
                       "NO_HEADERS\tnoheader\tnull-key-line"]


def test_plain_lines_sync_and_settings(broker_thread: BrokerThread, capsys, monkeypatch) -> None:
    b = broker_thread.bootstrap
    create_topic(b, "plain", 2)
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"a\nb\nc")))
    r = run_cli(capsys, "console-producer", "--bootstrap-server", b, "--topic", "plain", "--sync",
                "--request-required-acks", "1", "--compression-codec", "--producer-property", "linger.ms=0")
    assert r.rc == 0, r.err
    got = consume(b, "plain", [0, 1], 3)
    assert sorted(rec.value for rec in got) == [b"a", b"b", b"c"]
    assert all(rec.key is None for rec in got)


def test_bad_input_is_one_error_line(broker_thread: BrokerThread, capsys, monkeypatch) -> None:
    b = broker_thread.bootstrap
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"k:v\nnokey\n")))
    r = run_cli(capsys, "console-producer", "--bootstrap-server", b, "--topic", "t", "--property", "parse.key=true",
                "key.separator=:")
    assert (r.rc, r.err) == (1, "minikafka: error: no key separator found on line number 2: 'nokey'\n")
    r = run_cli(capsys, "console-producer", "--bootstrap-server", b, "--topic", "t", "--producer-property",
                "no.such.setting=1")
    assert (r.rc, r.err) == (1, "minikafka: error: unknown producer property 'no.such.setting'\n")


def test_line_reader_null_marker() -> None:
    reader = LineReader({"parse.key": "true", "key.separator": "|", "parse.headers": "true",
                         "null.marker": "NULL"})
    rec = reader.parse(b"h:NULL,bare\tNULL|NULL", 1)
    assert (rec.key, rec.value, rec.headers) == (None, None, [("h", None), ("bare", None)])
    with pytest.raises(ToolError, match="unknown --property"):
        LineReader({"parse.keys": "true"})
