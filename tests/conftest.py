"""Shared pytest fixtures (models and LLM layer section).

``small_llm``: the embedded Qwen2.5-Coder-0.5B-Instruct GGUF through in-process
llama.cpp (xllamacpp), wrapped in the sqlite cache. The GGUF file is assembled
once per machine into the normal user cache (``audit.core.config.subdir("models")``)
and reused by every session; the LLM *answer* cache lives in a per-session
temporary folder, so tests never see answers cached by an earlier run.

``minilm``: the embedded all-MiniLM-L6-v2 sentence embedder (no disk cache).

Both are session-scoped (loading takes seconds); use them only in tests marked
``@pytest.mark.slow``.
"""

from __future__ import annotations

import os
from pathlib import Path

# Under pytest-xdist (the README's test command runs ``-n 2``), each worker computes on its
# share of the cores: two workers of two threads on two cores would wait on each other's
# barriers (OpenMP spins there) and run several times slower than one at a time.
# Set before anything imports torch, which reads OMP_NUM_THREADS once; subprocesses inherit it.
if os.environ.get("PYTEST_XDIST_WORKER_COUNT"):
    _share = str(max(1, (os.cpu_count() or 1) // int(os.environ["PYTEST_XDIST_WORKER_COUNT"])))
    os.environ.setdefault("OMP_NUM_THREADS", _share)
    os.environ.setdefault("ANONAUDIT_THREADS", _share)

import pytest

from audit.core import config as audit_config

#: The user's cache folder as it was when the test session started (before any test points
#: ANONAUDIT_HOME at a temporary folder): the embedded models are assembled there once per machine.
_USER_HOME = str(audit_config.home())


#: The test files that take longest, longest first (measured: the TRIR fidelity guard ~720 s on
#: quiet cores, tests/test_readme.py ~640 s of a worker's time, test_scaleout.py ~530 s, the
#: others 50-300 s; the rest under 45 s each):
#: collected first, so that under xdist (``--dist loadfile --no-loadscope-reorder``, pyproject)
#: they start at once instead of last, when one worker would be left alone with them, and the
#: short files fill in at the end (longest first is what keeps two workers' ends close).
LONG_FIRST = ("tests/test_trir_fidelity.py", "tests/test_readme.py", "tests/test_scaleout.py",
              "tests/test_claim_linker.py", "tests/test_trir.py", "tests/test_harden.py", "tests/test_intact.py",
              "tests/test_llm_real.py", "tests/test_prompt_anonymizer.py", "tests/test_benchmarks.py", "tests/test_delinker.py",
              "tests/test_tae_config.py")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    rank = {name: i for i, name in enumerate(LONG_FIRST)}
    items.sort(key=lambda item: rank.get(item.nodeid.split("::")[0], len(LONG_FIRST)))  # stable otherwise


@pytest.fixture(scope="session", autouse=True)
def isolated_home(tmp_path_factory: pytest.TempPathFactory):
    """Point ANONAUDIT_HOME at a fresh folder for the whole session, so no test reads
    a cache (LLM answers, information content, trained attackers, lemma counts) left
    by an earlier run. Only the assembled model files are shared with the user's
    cache (``models/`` is a link), since assembling them is slow and they are verified
    by checksum."""
    home = tmp_path_factory.mktemp("anonaudit-home")
    user_models = Path(_USER_HOME) / "models"
    user_models.mkdir(parents=True, exist_ok=True)
    (home / "models").symlink_to(user_models, target_is_directory=True)
    old = {name: os.environ.get(name) for name in ("ANONAUDIT_HOME", "ANONAUDIT_LLM")}
    os.environ["ANONAUDIT_HOME"] = str(home)
    # The tests' default LLM is the 0.5B whatever else is installed, so a run means the same in CI
    # (which installs [llm]) and on a laptop; the 1.5B answers only where a test asks for it
    # (``quality_llm``). A user's own ANONAUDIT_LLM is kept.
    os.environ.setdefault("ANONAUDIT_LLM", "qwen2.5-coder-0.5b")
    yield home
    for name, value in old.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value


@pytest.fixture(scope="session")
def small_llm(tmp_path_factory: pytest.TempPathFactory):
    """The embedded 0.5B chat model via xllamacpp, with a fresh per-session answer cache."""
    from audit.models.specs import load_llm

    cache_dir = tmp_path_factory.mktemp("llm-cache")
    with pytest.MonkeyPatch.context() as mp:  # even if the first user set ANONAUDIT_HOME
        mp.setenv("ANONAUDIT_HOME", _USER_HOME)
        llm = load_llm("qwen2.5-coder-0.5b", cache=True, cache_path=cache_dir / "llm_cache.sqlite",
                       n_ctx=4096, n_parallel=2)
    yield llm
    llm.close()


@pytest.fixture(scope="session")
def quality_llm(tmp_path_factory: pytest.TempPathFactory):
    """The embedded 1.5B chat model via xllamacpp (the default LLM), with a fresh per-session
    answer cache: for the few slow tests whose method the 0.5B cannot carry."""
    from audit.models.specs import _installed, load_llm

    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("ANONAUDIT_HOME", _USER_HOME)
        if not _installed("qwen2.5-coder-1.5b"):  # a checkout with [llm-small] only: said, never silent
            pytest.skip("the embedded 1.5B is not installed: pip install 'anonaudit[llm]'")
    cache_dir = tmp_path_factory.mktemp("llm-cache-1.5b")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("ANONAUDIT_HOME", _USER_HOME)
        llm = load_llm("qwen2.5-coder-1.5b", cache=True, cache_path=cache_dir / "llm_cache.sqlite", n_ctx=4096)
    yield llm
    llm.close()


@pytest.fixture(scope="session")
def minilm():
    """The embedded all-MiniLM-L6-v2 sentence embedder (CPU, no disk cache)."""
    from audit.models.embed import Embedder

    return Embedder("minilm", cache=False)


@pytest.fixture
def fake_transformers_read(monkeypatch):
    """transformers' reading of a model replaced (for the logic of the GGUF file's dequantised
    copy): ``TransformersLLM._read`` gives a tokeniser ``"tok"`` and a model that moves nowhere,
    and records ``(folder name, kwargs, whether it read the copy)``; returns those records."""
    import audit.models.backends as backends

    class Model:
        def to(self, device):
            return self

        def eval(self):
            return self

    reads: list[tuple[str, dict, bool]] = []

    def read(self, folder, kwargs, copy=False):
        reads.append((folder.name, kwargs, copy))
        return "tok", Model()

    monkeypatch.setattr(backends.TransformersLLM, "_read", read)
    return reads
