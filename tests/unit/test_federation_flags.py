"""``federation`` flags with values that cannot work are refused up front, naming the flag.

Before: ``serve --submit-batch-size 0`` and ``--max-pending-per-round 0`` were
``ValueError`` tracebacks; ``--round-debounce-seconds nan``, ``--agent-grace-seconds -5``
or ``demo --speed nan`` were accepted (and the demo hung); ``demo --speed -1`` was "a
clock cannot go backwards"; ``--db bogus://x`` a SQLAlchemy traceback; ``db upgrade`` on
an unreachable database a traceback; ``bench --json DIR`` a traceback after every policy
had run; ``demo --out /dev/null`` a ``FileExistsError`` traceback.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from federation.cli.main import main


@pytest.mark.parametrize(("argv", "flag"), [
    pytest.param(["serve", "--submit-batch-size", "0"], "--submit-batch-size", id="an empty batch"),
    pytest.param(["serve", "--max-pending-per-round", "0"], "--max-pending-per-round", id="no pending job"),
    pytest.param(["serve", "--round-debounce-seconds", "nan"], "--round-debounce-seconds", id="NaN debounce"),
    pytest.param(["serve", "--agent-grace-seconds", "-5"], "--agent-grace-seconds", id="a negative grace"),
    pytest.param(["serve", "--plan-time-limit", "0"], "--plan-time-limit", id="no planning time"),
    pytest.param(["serve", "--lease-seconds", "inf"], "--lease-seconds", id="an endless lease"),
    pytest.param(["serve", "--submit-batch-delay-ms", "-1"], "--submit-batch-delay-ms", id="a negative delay"),
    pytest.param(["serve", "--shutdown-grace-seconds", "nan"], "--shutdown-grace-seconds", id="NaN grace"),
    pytest.param(["serve", "--max-replicas-per-task", "0"], "--max-replicas-per-task", id="a zero limit"),
    pytest.param(["serve", "--db", "bogus://x"], "--db", id="an unknown database"),
    pytest.param(["db", "upgrade", "--db", "federation.db"], "--db", id="a path, not a URL"),
    pytest.param(["demo", "--speed", "-1"], "--speed", id="time going backwards"),
    pytest.param(["demo", "--speed", "nan"], "--speed", id="NaN speed"),
    pytest.param(["demo", "--max-wall-seconds", "nan"], "--max-wall-seconds", id="NaN wall time"),
    pytest.param(["demo", "--agent-grace-seconds", "0"], "--agent-grace-seconds", id="no agent grace"),
])
def test_flag_values_that_cannot_work_exit_2_naming_the_flag(
        argv: list[str], flag: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(argv)
    assert info.value.code == 2
    assert f"error: argument {flag}: " in capsys.readouterr().err


def test_a_database_url_is_not_echoed_when_refused(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["db", "upgrade", "--db", "postgres://user:s3cret@db/x"])
    err = capsys.readouterr().err
    assert "scheme 'postgres'" in err and "s3cret" not in err


@pytest.mark.parametrize(("flag", "target", "rule"), [
    pytest.param("--json", ".", "is a directory, not a file", id="json into a directory"),
    pytest.param("--placements", "no/such/dir/p.jsonl", "no such directory", id="placements nowhere"),
])
def test_bench_outputs_are_checked_before_the_run(
        flag: str, target: str, rule: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = str(tmp_path / target)
    assert main(["bench", "--scenario", "fragmented", flag, path]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"error: {flag}: ") and rule in err


def test_demo_out_that_cannot_be_a_directory_is_one_line(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "file").write_text("")
    assert main(["demo", "--plain", "--out", str(tmp_path / "file")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("error: --out: ") and "file exists" in err


def test_db_upgrade_of_an_unreachable_database_is_one_line_exit_1(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["db", "upgrade", "--db", f"sqlite:///{tmp_path}/no/such/dir/f.db"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("error: --db: ") and "database unavailable" in err


def test_demo_with_an_unreachable_database_is_one_line_exit_1(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["demo", "--plain", "--out", str(tmp_path / "out"), "--db", f"sqlite:///{tmp_path}/no/such/dir/a.db"])
    err = capsys.readouterr().err
    assert code == 1 and err.count("\n") == 1 and err.startswith("error: --db: sqlite:///"), err


def test_db_revisions_that_do_not_exist_exit_2_and_the_real_revision_is_reported(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``--revision nonsense`` was an alembic traceback; the success line printed the revision
    asked for, even when an upgrade "to" an older one left the database at head."""
    db = f"sqlite:///{tmp_path}/f.db"
    assert main(["db", "upgrade", "--db", db]) == 0
    head = capsys.readouterr().out.split()[-1]
    assert main(["db", "downgrade", "--db", db, "--revision", "nonsense"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("error: revision nonsense: "), err
    assert main(["db", "upgrade", "--db", db, "--revision", "0001"]) == 0
    assert capsys.readouterr().out.split()[-1] == head
    assert main(["db", "downgrade", "--db", db, "--revision", "base"]) == 0
    assert capsys.readouterr().out.split()[-1] == "base"


@pytest.mark.parametrize("revision", ["", "0009@head", "head@x", "@", "0001:0002"])
@pytest.mark.parametrize("command", ["upgrade", "downgrade"])
def test_db_revisions_alembic_cannot_parse_exit_2_in_one_line(
        command: str, revision: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """An empty ``--revision`` or a branch-label form (``0009@head``) reached an ``assert``
    inside alembic: an AssertionError traceback and exit 1; the database is left as it was."""
    db = f"sqlite:///{tmp_path}/f.db"
    assert main(["db", "upgrade", "--db", db]) == 0
    head = capsys.readouterr().out.split()[-1]
    assert main(["db", command, "--db", db, "--revision", revision]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"error: revision {revision}: "), err
    assert main(["db", "upgrade", "--db", db]) == 0
    assert capsys.readouterr().out.split()[-1] == head


@pytest.mark.parametrize(("cert", "key", "flag"), [
    pytest.param("/dev/zero", "/dev/zero", "--tls-key", id="an endless device (MemoryError)"),
    pytest.param("{tmp}", "{tmp}/key.pem", "--tls-key", id="a missing key"),
    pytest.param("{tmp}", "/dev/null", "--tls-cert", id="a directory as the certificate"),
])
def test_serve_tls_files_are_read_bounded_and_refused_naming_the_flag(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], cert: str, key: str, flag: str) -> None:
    code = main(["serve", "--listen", "127.0.0.1:0", "--db", f"sqlite:///{tmp_path}/a.db",
                 "--tls-cert", cert.format(tmp=tmp_path), "--tls-key", key.format(tmp=tmp_path)])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and err.startswith(f"error: {flag}: "), err
    assert not (tmp_path / "a.db").exists()  # refused before the store was opened
