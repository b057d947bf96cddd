"""Where orgate keeps its files, and the owner-only permissions they get.

Every file orgate writes lives in one data directory unless a setting names another path:
``$ORGATE_DATA_DIR`` (``orgate --data-dir DIR`` sets it), else ``$XDG_DATA_HOME/orgate``,
else ``~/.local/share/orgate``. Nothing is created until the feature that needs a file
writes it (``private_dir`` / ``private_file``): a command that only reads never creates
anything. Directories orgate creates are 0700 and files 0600, whatever the umask: they
hold prompts, model outputs and keys.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

ENV = "ORGATE_DATA_DIR"

#: The files orgate writes in the data directory, by default.
STORE_FILE = "orgate.db"
REVIEW_FILE = "review.db"
COMPACTION_KEY_FILE = "compaction.key"


def data_dir() -> Path:
    """The data directory (not created)."""
    explicit = os.environ.get(ENV)
    if explicit:
        return Path(explicit).expanduser()
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base).expanduser() / "orgate"


def private_dir(path: str | Path) -> Path:
    """Create ``path`` and its missing parents owner-only (0700); an existing one is left as is.
    Raises ``OSError``."""
    path = Path(path)
    if path.is_dir():
        return path
    missing: list[Path] = []
    probe = path
    while not probe.exists() and probe != probe.parent:
        missing.append(probe)
        probe = probe.parent
    for directory in reversed(missing):
        with contextlib.suppress(FileExistsError):  # a concurrent process made it
            directory.mkdir(mode=0o700)
        os.chmod(directory, 0o700)  # mkdir's mode passes through the umask
    return path


def private_file(path: str | Path) -> Path:
    """Make sure ``path`` exists, owner-only (0600) when this call creates it, in a directory
    made with ``private_dir``. Raises ``OSError``."""
    path = Path(path)
    private_dir(path.parent)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return path
    os.close(fd)
    os.chmod(path, 0o600)
    return path


def unwritable(path: str | Path) -> str | None:
    """Why a file could not be created at ``path`` (None when it could), without creating anything:
    the nearest existing ancestor must be a directory this process may write to."""
    path = Path(path)
    if path.exists():
        if path.is_dir():
            return "it is a directory"
        return None if os.access(path, os.R_OK | os.W_OK) else "permission denied"
    probe = path.parent
    while not probe.exists():
        if probe == probe.parent:
            return "no such directory"
        probe = probe.parent
    if not probe.is_dir():
        return f"{probe} is not a directory"
    if not os.access(probe, os.W_OK | os.X_OK):
        return f"{probe} is not writable"
    return None
