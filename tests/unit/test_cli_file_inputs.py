"""Files named on a command line are read bounded and refused in one line naming the flag.

Before ``federation/files.py``: ``fedctl apply -f /dev/zero`` (or ``- < /dev/zero``) read
until MemoryError, a FIFO with no writer hung ``open``, ``federation bench`` on a non-UTF-8
file printed a ``UnicodeDecodeError`` traceback, ``--ca DIR`` said ``[Errno 21]`` naming no
flag, and an empty ``apply`` (an empty directory, a comment-only rendering) exited 0 having
applied nothing. None of these needs a server: each is refused before the first call.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from federation.cli import apply
from federation.cli.fedctl import main as fedctl
from federation.cli.main import main as federation
from federation.domain.errors import InvalidInput
from federation.files import read_text

REPO = Path(__file__).resolve().parents[2]


def _one_line(capsys: pytest.CaptureFixture[str], starts: str, *contains: str) -> None:
    captured = capsys.readouterr()
    lines = (captured.err + captured.out).strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {starts}"), lines
    for text in contains:
        assert text in lines[0], lines[0]


def _special(tmp_path: Path, kind: str) -> str:
    """A hostile path of ``kind`` under ``tmp_path``."""
    path = tmp_path / kind
    if kind == "directory":
        path.mkdir()
    elif kind == "symlink-loop":
        os.symlink(tmp_path / "other", path)
        os.symlink(path, tmp_path / "other")
    elif kind == "not-utf8":
        path.write_bytes(b"name: \xff\xfe\n")
    elif kind == "sparse-20GiB":
        with path.open("wb") as f:
            f.truncate(20 * 1024**3)  # sparse: no disk used, refused by its size before a read
    elif kind == "fifo":
        os.mkfifo(path)
    else:
        return kind  # a device such as /dev/zero
    return str(path)


@pytest.mark.parametrize(("kind", "rule"), [
    pytest.param("/dev/zero", "is over the limit of 16777216 bytes", id="dev-zero"),
    pytest.param("sparse-20GiB", "is 21474836480 bytes, over the limit", id="a 20 GiB file"),
    pytest.param("directory", "is a directory, not a file", id="a directory"),
    pytest.param("symlink-loop", "too many levels of symbolic links", id="a symlink loop"),
    pytest.param("not-utf8", "not UTF-8 text (byte 0xff at offset 6)", id="not UTF-8"),
    pytest.param("absent.yaml", "no such file", id="missing"),
])
@pytest.mark.parametrize("command", [["submit"], ["queue", "create"]])
def test_fedctl_file_inputs_are_one_line_naming_the_flag(
        command: list[str], kind: str, rule: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _special(tmp_path, kind) if kind != "absent.yaml" else str(tmp_path / kind)
    assert fedctl(["--server", "127.0.0.1:1", *command, "-f", path]) == 2
    _one_line(capsys, "-f: ", rule)


def test_a_fifo_with_no_writer_reads_as_empty_instead_of_hanging(tmp_path: Path) -> None:
    fifo = _special(tmp_path, "fifo")
    done = subprocess.run([sys.executable, "-m", "federation.cli.fedctl", "--server", "127.0.0.1:1", "apply",
                           "-f", fifo], capture_output=True, text=True, timeout=60, cwd=REPO)
    assert done.returncode == 2 and done.stderr == f"error: -f: no objects to apply in {fifo}\n"


def test_stdin_is_bounded_too() -> None:
    with open("/dev/zero", "rb") as zero:
        done = subprocess.run([sys.executable, "-m", "federation.cli.fedctl", "--server", "127.0.0.1:1", "apply",
                               "-f", "-"], stdin=zero, capture_output=True, text=True, timeout=60, cwd=REPO)
    assert done.returncode == 2 and done.stderr == "error: -f: stdin: is over the limit of 16777216 bytes\n"


@pytest.mark.parametrize("contents", [None, "# only a comment\n---\n"], ids=["an empty directory", "no documents"])
def test_apply_with_nothing_to_apply_is_refused(
        contents: str | None, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    target = tmp_path / "rendered.yaml"
    if contents is None:
        target.mkdir()
    else:
        target.write_text(contents)
    assert fedctl(["--server", "127.0.0.1:1", "apply", "-f", str(target)]) == 2
    _one_line(capsys, "-f: no objects to apply in ", str(target))


def test_the_files_of_one_apply_are_bounded_together(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """Every document is parsed and kept before the first is sent, so many files each under
    the per-file limit must not add up without bound."""
    monkeypatch.setattr(apply, "MAX_MANIFEST_BYTES", 1000)
    for name in ("a.yaml", "b.yaml"):
        (tmp_path / name).write_text("# padding\n" * 60)
    assert fedctl(["--server", "127.0.0.1:1", "apply", "-f", str(tmp_path)]) == 2
    _one_line(capsys, "-f: the files hold over 1000 characters together (at ", "b.yaml")


@pytest.mark.parametrize(("flag", "kind", "rule"), [
    pytest.param("--ca", "directory", "is a directory, not a file", id="a CA directory"),
    pytest.param("--ca", "/dev/zero", "is over the limit of 1048576 bytes", id="an endless CA"),
    pytest.param("--cert", "absent.pem", "no such file", id="a missing certificate"),
])
def test_tls_files_name_their_flag(
        flag: str, kind: str, rule: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _special(tmp_path, kind) if kind != "absent.pem" else str(tmp_path / kind)
    (tmp_path / "key.pem").write_text("not used: the certificate is refused first\n")
    key = ["--key", str(tmp_path / "key.pem")] if flag == "--cert" else []
    assert fedctl(["--server", "127.0.0.1:1", flag, path, *key, "list", "jobs"]) == 2
    _one_line(capsys, f"{flag}: ", rule)


def test_a_byte_order_mark_is_not_part_of_the_text(tmp_path: Path) -> None:
    path = tmp_path / "bom.yaml"
    path.write_bytes(b"\xef\xbb\xbfname: x\n")
    assert read_text(str(path), "-f", 100) == "name: x\n"
    with pytest.raises(InvalidInput) as info:
        read_text(str(path), "-f", 5)
    assert info.value.path == "-f" and "over the limit of 5 bytes" in info.value.rule


@pytest.mark.parametrize(("kind", "rule"), [
    pytest.param("/dev/zero", "is over the limit of", id="dev-zero"),
    pytest.param("directory", "is a directory, not a file", id="a directory"),
    pytest.param("not-utf8", "not UTF-8 text", id="not UTF-8"),
    pytest.param("absent.yaml", "no such file or built-in scenario", id="missing"),
])
def test_bench_scenario_files_are_one_line_naming_the_flag(
        kind: str, rule: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _special(tmp_path, kind) if kind != "absent.yaml" else str(tmp_path / kind)
    assert federation(["bench", "--scenario", path, "--policy", "volcano-greedy"]) == 2
    _one_line(capsys, "--scenario: ", rule)
