"""The compaction sealing key (``orgate.engine.compaction.key``), in process, with real files.

As its docstring says: ``derive_key`` makes a 32-byte key from a secret (HKDF-SHA256);
``load_or_create_key`` reads a key file of random bytes, creating it once, privately and
atomically, so that processes sharing a data directory share the key; a file that cannot
be created or read, or is too short, is a ``KeyFileError`` naming the setting and the path.
"""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from orgate.engine.compaction.key import KEY_BYTES, KeyFileError, derive_key, load_or_create_key


def test_a_derived_key_is_32_bytes_fixed_by_its_secret() -> None:
    key = derive_key(b"shared secret")
    assert len(key) == KEY_BYTES == 32
    assert derive_key(b"shared secret") == key
    assert derive_key(b"another secret") != key
    assert key != b"shared secret".ljust(32, b"\0")  # derived, never the secret itself


def test_a_missing_key_file_is_created_privately_once(tmp_path: Path) -> None:
    path = tmp_path / "data" / "compaction.key"
    key = load_or_create_key(path)
    assert len(path.read_bytes()) == KEY_BYTES and path.stat().st_mode & 0o777 == 0o600
    assert key == derive_key(path.read_bytes())  # the file holds the material, not the key
    assert load_or_create_key(path) == key  # the next start reads the same file
    assert sorted(p.name for p in path.parent.iterdir()) == [
        "compaction.key"
    ]  # no temporary file left


def test_two_files_give_two_keys(tmp_path: Path) -> None:
    assert load_or_create_key(tmp_path / "a.key") != load_or_create_key(tmp_path / "b.key")


def test_processes_starting_together_share_one_key(tmp_path: Path) -> None:
    path = tmp_path / "compaction.key"
    keys: list[bytes] = []
    start = threading.Barrier(8)

    def load() -> None:
        start.wait()
        keys.append(load_or_create_key(path))

    threads = [threading.Thread(target=load) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(keys) == 8 and set(keys) == {derive_key(path.read_bytes())}


def test_a_short_key_file_is_refused_naming_it(tmp_path: Path) -> None:
    path = tmp_path / "compaction.key"
    path.write_bytes(b"x" * 31)
    with pytest.raises(KeyFileError) as caught:
        load_or_create_key(path, "[compaction] key_file")
    message = str(caught.value)
    assert (
        message.startswith(f"[compaction] key_file {path}:")
        and "31 bytes" in message
        and "32" in message
    )


def test_a_key_file_that_cannot_be_read_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "compaction.key"
    path.mkdir()  # not a file
    with pytest.raises(KeyFileError) as caught:
        load_or_create_key(path)
    assert "compaction.key_file" in str(caught.value) and "cannot read it" in str(caught.value)


def test_a_key_file_that_cannot_be_created_says_what_to_set(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.symlink_to(tmp_path / "unmounted-volume")  # a data directory whose target is not there
    with pytest.raises(KeyFileError) as caught:
        load_or_create_key(data / "compaction.key")
    assert "cannot create it" in str(caught.value) and "key_file or secret" in str(caught.value)
