"""The compaction sealing key: derived from a secret (HKDF-SHA256), or random bytes kept in a
key file.

The key seals compaction items (``compaction.seal``); every process serving one
store must hold the same one. ``derive_key(secret)`` gives it from a shared
secret; ``load_or_create_key(path)`` from a file of random bytes created once,
atomically (processes on one host that share the data directory share the key).
Which of the two a server uses is configuration (``server/services.py``).
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from orgate.datadir import private_dir

_HKDF_INFO = b"orgate compaction key v1"
KEY_BYTES = 32


class KeyFileError(ValueError):
    """A key file that cannot be created or read, or that is too short (the message names it)."""


def derive_key(material: bytes) -> bytes:
    """The 32-byte sealing key made from ``material`` (a secret, or a key file's bytes)."""
    return HKDF(algorithm=hashes.SHA256(), length=KEY_BYTES, salt=None, info=_HKDF_INFO).derive(
        material
    )


def load_or_create_key(path: Path, where: str = "compaction.key_file") -> bytes:
    """The sealing key from the random bytes in ``path``, which is created when missing."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        _create(path, where)
        data = _read(path, where)
    except OSError as exc:
        raise KeyFileError(f"{where} {path}: cannot read it ({exc.strerror})") from None
    if len(data) < KEY_BYTES:
        raise KeyFileError(
            f"{where} {path}: holds {len(data)} bytes, expected at least {KEY_BYTES} random bytes"
        )
    return derive_key(data)


def _read(path: Path, where: str) -> bytes:
    try:
        return path.read_bytes()
    except OSError as exc:
        raise KeyFileError(f"{where} {path}: cannot read it ({exc.strerror})") from None


def _create(path: Path, where: str) -> None:
    """Random bytes written to a private temporary file, then linked to ``path``: atomic, so a
    concurrent process that linked first wins and both read its key."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}")
    try:
        private_dir(path.parent)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except OSError as exc:
        raise KeyFileError(
            f"{where} {path}: cannot create it ({exc.strerror}); set [compaction] key_file or"
            " secret"
        ) from None
    try:
        os.write(fd, secrets.token_bytes(KEY_BYTES))
        os.fsync(fd)
    finally:
        os.close(fd)
    try:
        os.link(tmp, path)
    except FileExistsError:
        pass
    finally:
        os.unlink(tmp)
