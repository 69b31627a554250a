"""``federation-agent`` flags that cannot work are refused before anything starts, naming the flag.

Before: ``--heartbeat-seconds nan`` or ``-5`` and ``--lease-duration 0`` were accepted and
the agent ran on (heartbeats in a busy loop, a Lease no replica can hold); a cluster name
or agent id central refuses in every hello made the agent reconnect for ever;
``--fake-nodes 100000000`` allocated until memory ran out; a missing ``--token-file`` was a
traceback and ``--token-file /dev/zero`` read without end.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from agents.flags import MAX_TOKEN_BYTES
from agents.main import config, main, parser

BASE = ["--cluster", "east", "--server", "127.0.0.1:50051", "--fake-nodes", "2", "--no-leader-election"]


def _without(flag: str) -> list[str]:
    """BASE minus ``flag`` and its value, so a case can set the flag itself."""
    i = BASE.index(flag)
    return BASE[:i] + BASE[i + 2:]


@pytest.mark.parametrize(("argv", "flag"), [
    pytest.param([*_without("--cluster"), "--cluster", "East_1"], "--cluster", id="a cluster name central refuses"),
    pytest.param([*_without("--server"), "--server", "central"], "--server", id="no port"),
    pytest.param([*_without("--server"), "--server", ":50051"], "--server", id="no host"),
    pytest.param([*_without("--server"), "--server", "central:0"], "--server", id="port 0"),
    pytest.param([*_without("--fake-nodes"), "--fake-nodes", "100000000"], "--fake-nodes",
                 id="nodes past any snapshot"),
    pytest.param([*BASE, "--heartbeat-seconds", "nan"], "--heartbeat-seconds", id="NaN heartbeat"),
    pytest.param([*BASE, "--heartbeat-seconds", "-5"], "--heartbeat-seconds", id="a negative heartbeat"),
    pytest.param([*BASE, "--snapshot-period-seconds", "0"], "--snapshot-period-seconds", id="no snapshot period"),
    pytest.param([*BASE, "--lease-duration", "0"], "--lease-duration", id="a Lease nobody holds"),
    pytest.param([*BASE, "--lease-duration", "inf"], "--lease-duration", id="an endless Lease"),
    pytest.param([*BASE, "--identity", "pod\nforged log line"], "--identity", id="an id central refuses"),
    pytest.param([*BASE, "--identity", "p" * 513], "--identity", id="an id over central's bound"),
    pytest.param([*BASE, "--namespace", "Federation System"], "--namespace", id="a namespace no Lease can be in"),
    pytest.param([*BASE, "--lease-name", "UPPER"], "--lease-name", id="a Lease name Kubernetes refuses"),
    pytest.param([*BASE, "--cluster-label", "region"], "--cluster-label", id="no value"),
    pytest.param([*BASE, "--cluster-label", "bad key=v"], "--cluster-label", id="a key no label can have"),
    pytest.param([*BASE, "--cluster-label", "zone=a b"], "--cluster-label", id="a value no label can have"),
    pytest.param([*BASE, "--label-discovery", "rack,a/b/c"], "--label-discovery", id="a key no label can have"),
    pytest.param([*BASE, "--token", "line\nbreak"], "--token", id="a token gRPC metadata cannot carry"),
])
def test_flag_values_that_cannot_work_exit_2_naming_the_flag(
        argv: list[str], flag: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(argv)
    assert info.value.code == 2
    assert f"error: argument {flag}: " in capsys.readouterr().err


def _file(tmp_path: Path, content: bytes) -> str:
    path = tmp_path / "f"
    path.write_bytes(content)
    return str(path)


@pytest.mark.parametrize(("flag", "make", "rule"), [
    pytest.param("--token-file", lambda tmp: str(tmp / "missing"), "no such file", id="a missing token file"),
    pytest.param("--token-file", lambda tmp: "/dev/zero", f"over the limit of {MAX_TOKEN_BYTES} bytes",
                 id="a token file without end"),
    pytest.param("--token-file", lambda tmp: _file(tmp, b"\n\n"), "is empty", id="an empty token file"),
    pytest.param("--token-file", lambda tmp: _file(tmp, b"tok\xffen"), "printable ASCII", id="a binary token"),
    pytest.param("--token-file", lambda tmp: _file(tmp, b"two\nlines"), "printable ASCII", id="a token of two lines"),
    pytest.param("--token-file", lambda tmp: str(tmp), "is a directory", id="a directory"),
    pytest.param("--ca", lambda tmp: str(tmp / "missing"), "no such file", id="a missing CA"),
    pytest.param("--ca", lambda tmp: "/dev/zero", "over the limit", id="a CA without end"),
])
def test_secret_files_are_read_bounded_and_refused_naming_the_flag(
        flag: str, make: object, rule: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert callable(make)
    assert main([*BASE, flag, make(tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"error: {flag}: ") and rule in err and len(err.splitlines()) == 1


def test_cert_without_key_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main([*BASE, "--cert", _file(tmp_path, b"-----BEGIN CERTIFICATE-----\n")]) == 2
    assert "error: --cert: --cert and --key go together" in capsys.readouterr().err


def test_accepted_values_reach_the_runtime_as_given(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("POD_NAME", raising=False)
    token = _file(tmp_path, b"s3cret-token\n")
    args = parser().parse_args([
        *BASE, "--token-file", token, "--identity", "agent-0 pid 42", "--heartbeat-seconds", "0.5",
        "--snapshot-period-seconds", "60", "--lease-duration", "15", "--cluster-label", "region=eu-west-1",
        "--cluster-label", "tier=", "--label-discovery", "topology.kubernetes.io/spine, rack",
    ])
    cfg = config(args)
    assert (cfg.cluster, cfg.server, cfg.token, cfg.agent_id) == ("east", "127.0.0.1:50051", "s3cret-token",
                                                                   "agent-0 pid 42")
    assert (cfg.heartbeat_seconds, cfg.snapshot_period_seconds) == (0.5, 60.0)
    assert cfg.cluster_labels == {"region": "eu-west-1", "tier": ""}
    assert cfg.label_keys == ("topology.kubernetes.io/spine", "rack")
    assert cfg.credentials is None


def test_pod_name_default_is_checked_like_the_flag(monkeypatch: pytest.MonkeyPatch,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setitem(os.environ, "POD_NAME", "x" * 600)
    with pytest.raises(SystemExit) as info:
        parser().parse_args(BASE)
    assert info.value.code == 2 and "error: argument --identity: " in capsys.readouterr().err


@pytest.mark.parametrize(("extra", "flag"), [
    pytest.param(["--token", "t", "--token-file", "/etc/hostname"], "--token", id="a token twice"),
    pytest.param(["--namespace", "a", "--lease-namespace", "b"], "--lease-namespace", id="two Lease namespaces"),
])
def test_two_flags_saying_one_thing_must_not_disagree(extra: list[str], flag: str,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    """One of them was ignored without a word (the token file won, --namespace won)."""
    assert main([*BASE, *extra]) == 2
    assert capsys.readouterr().err.startswith(f"error: {flag}: ")
