"""``ANONAUDIT_THREADS``: the CPU threads of the stages that are not told (llama.cpp, faiss)."""

from __future__ import annotations

import os

import pytest

from audit.core import config
from audit.core.errors import AnonauditError


def test_every_core_unless_the_environment_says(monkeypatch):
    monkeypatch.delenv(config.THREADS_ENV, raising=False)
    assert config.threads() == max(1, os.cpu_count() or 1)
    monkeypatch.setenv(config.THREADS_ENV, " 3 ")
    assert config.threads() == 3


@pytest.mark.parametrize("bad", ["0", "-1", "two", "1.5"])
def test_a_bad_thread_count_is_an_error_naming_the_variable(monkeypatch, bad):
    monkeypatch.setenv(config.THREADS_ENV, bad)
    with pytest.raises(AnonauditError, match="ANONAUDIT_THREADS"):
        config.threads()


def test_test_workers_get_their_share_of_the_cores():
    """Under pytest-xdist (the README's test command) the conftest gives each worker its share."""
    workers = os.environ.get("PYTEST_XDIST_WORKER_COUNT")
    if not workers:
        pytest.skip("not run under pytest-xdist: no worker shares the cores")
    share = max(1, (os.cpu_count() or 1) // int(workers))
    assert os.environ["OMP_NUM_THREADS"] == os.environ[config.THREADS_ENV] == str(share)
