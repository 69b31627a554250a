"""Reading a file a user names on a command line: bounded, and refused in one line.

Why not ``Path.read_text``: ``-f /dev/zero`` or a multi-GB file was read whole into
memory (MemoryError after a long stall), a FIFO with no writer blocked ``open`` for ever,
and a directory, a symlink loop or a non-UTF-8 byte left as a bare ``OSError`` or a
``UnicodeDecodeError`` traceback naming no flag. Here every file is read in chunks up to
``limit`` bytes and refused as soon as there is more, whatever kind of file it is (a
regular file's size is checked before the first read); a FIFO is opened without blocking,
so one with no writer reads as empty instead of hanging; and every refusal is an
``InvalidInput`` naming the flag, the file and the rule.
"""

from __future__ import annotations

import os
import stat
import sys

from federation.domain.errors import InvalidInput

MIB = 1024 * 1024
# A manifest file (fedctl -f, one of a directory's files, or stdin): real ones are a few KiB;
# a JobSpec travels in at most 1 MiB and a request in 4 MiB, so 16 MiB of documents is
# generous and still parses in about a minute.
MAX_MANIFEST_BYTES = 16 * MIB
# A PEM file (fedctl --ca/--cert/--key): a certificate chain is a few KiB.
MAX_PEM_BYTES = 1 * MIB
STDIN = "-"
_CHUNK = 1 * MIB


def read_bytes(path: str, flag: str, limit: int) -> bytes:
    """At most ``limit`` bytes of ``path`` (``-`` is stdin); ``InvalidInput(flag, ...)`` else."""
    if path == STDIN:
        return _bounded(sys.stdin.buffer.fileno(), "stdin", flag, limit)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        raise InvalidInput(flag, f"{path}: no such file") from None
    except OSError as exc:
        raise InvalidInput(flag, f"{path}: {_reason(exc)}") from None
    try:
        info = os.fstat(fd)
        if stat.S_ISDIR(info.st_mode):
            raise InvalidInput(flag, f"{path}: is a directory, not a file")
        if stat.S_ISREG(info.st_mode) and info.st_size > limit:
            raise InvalidInput(flag, f"{path}: is {info.st_size} bytes, over the limit of {limit} bytes")
        os.set_blocking(fd, True)  # O_NONBLOCK was for opening a FIFO; a writer that is there is waited for
        return _bounded(fd, path, flag, limit)
    finally:
        os.close(fd)


def read_text(path: str, flag: str, limit: int) -> str:
    """``read_bytes`` decoded as UTF-8 (a byte-order mark is dropped, as YAML allows)."""
    data = read_bytes(path, flag, limit)
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        where = "stdin" if path == STDIN else path
        raise InvalidInput(flag, f"{where}: not UTF-8 text (byte 0x{data[exc.start]:02x} at offset "
                                 f"{exc.start})") from None


def _bounded(fd: int, name: str, flag: str, limit: int) -> bytes:
    chunks: list[bytes] = []
    size = 0
    while True:
        try:
            chunk = os.read(fd, min(_CHUNK, limit + 1 - size))
        except OSError as exc:
            raise InvalidInput(flag, f"{name}: {_reason(exc)}") from None
        if not chunk:
            return b"".join(chunks)
        size += len(chunk)
        if size > limit:
            raise InvalidInput(flag, f"{name}: is over the limit of {limit} bytes")
        chunks.append(chunk)


def _reason(exc: OSError) -> str:
    return (exc.strerror or type(exc).__name__).lower()
