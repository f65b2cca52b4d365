"""The OpenAI-compatible server backend (vLLM, llama.cpp's server, Ollama, any ``/v1`` endpoint), and
which servers may receive an API key."""

from __future__ import annotations

import logging
import os
import random
import time
from collections.abc import Mapping
from typing import Any

from audit.models.llm import LLM, ChatRequest, LLMError
from audit.models.backends import map_concurrently

log = logging.getLogger(__name__)


#: Hosts (``host`` or ``host:port``, comma-separated) that may receive the API key over plain
#: http although they are not this machine: the user names the servers the key is meant for.
HTTP_KEY_HOSTS_ENV = "ANONAUDIT_HTTP_KEY_HOSTS"


def _is_loopback(host: str) -> bool:
    import ipaddress

    if host.lower() in ("localhost", "localhost.localdomain") or host.lower().endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def server_api_key(base_url: str, environ: Mapping[str, str] | None = None) -> str | None:
    """The API key to send to the server at ``base_url``: ``ANONAUDIT_API_KEY``, else
    ``OPENAI_API_KEY``. Over https it is always sent; over plain http (readable by anyone on
    the way) only to this machine (a loopback address) or to a host the user listed in
    ``ANONAUDIT_HTTP_KEY_HOSTS`` — an OpenAI key set for other tools never leaks to a
    ``http://`` server by accident. A key held back is logged as a warning."""
    from urllib.parse import urlsplit

    env = os.environ if environ is None else environ
    key = env.get("ANONAUDIT_API_KEY") or env.get("OPENAI_API_KEY")
    if not key:
        return None
    parts = urlsplit(base_url)
    if parts.scheme.lower() == "https":
        return key
    host = (parts.hostname or "").lower()
    try:
        port = parts.port
    except ValueError:
        port = None
    allowed = {h.strip().lower() for h in env.get(HTTP_KEY_HOSTS_ENV, "").split(",") if h.strip()}
    if _is_loopback(host) or host in allowed or (port is not None and f"{host}:{port}" in allowed):
        return key
    log.warning("not sending the API key to %s: it is plain http and not this machine; use https, or "
                "list the host in %s=%s if the key is meant for it", base_url, HTTP_KEY_HOSTS_ENV, host)
    return None


class OpenAILLM(LLM):
    """Any OpenAI-compatible server (vLLM, llama.cpp server, Ollama, OpenAI).

    Requests are sent concurrently from a thread pool (``max_workers``), each with a
    timeout, retried with exponential backoff (and jitter) on 429, 5xx and connection
    errors. ``json_schema`` goes out as ``response_format`` (type ``json_schema``), which
    vLLM, llama.cpp and OpenAI enforce. :meth:`logprobs` uses ``/completions`` with
    ``echo`` and ``logprobs`` (vLLM and llama.cpp-compatible servers; OpenAI chat models
    do not offer it). The API key comes from ``api_key``, else :func:`server_api_key`
    (``ANONAUDIT_API_KEY``, else ``OPENAI_API_KEY``, sent over plain http only where meant).
    """

    supports_schema = True
    RETRY_STATUS = frozenset({408, 409, 425, 429, 500, 502, 503, 504})

    def __init__(self, model: str, base_url: str, *, api_key: str | None = None, timeout: float = 120.0,
                 max_retries: int = 5, backoff: float = 1.0, max_workers: int = 4, context_size: int = 4096):
        import httpx

        self.model = model
        self.base_url = base_url.rstrip("/")
        self.identity = f"openai:{model}@{self.base_url}"
        self.context_size = context_size
        self.max_retries = max_retries
        self.backoff = backoff
        self.max_workers = max(1, max_workers)
        key = api_key if api_key is not None else server_api_key(self.base_url)
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        self._httpx = httpx
        self._client = httpx.Client(base_url=self.base_url, headers=headers, timeout=timeout,
                                    limits=httpx.Limits(max_connections=self.max_workers * 2))

    def _post(self, path: str, payload: dict[str, Any]) -> dict[str, Any]:
        httpx = self._httpx
        url = f"{self.base_url}{path}"
        last = ""
        for attempt in range(self.max_retries + 1):
            try:
                resp = self._client.post(path, json=payload)
            except (httpx.TimeoutException, httpx.TransportError) as exc:
                last = f"{type(exc).__name__}: {exc}"
            else:
                if resp.status_code < 400:
                    try:
                        return resp.json()
                    except ValueError as exc:
                        raise LLMError(f"{url} answered with invalid JSON: {resp.text[:200]}") from exc
                last = f"HTTP {resp.status_code}: {resp.text[:300]}"
                if resp.status_code not in self.RETRY_STATUS:
                    raise LLMError(f"{url} refused the request ({last})")
            if attempt < self.max_retries:
                delay = self.backoff * (2 ** attempt) * (0.5 + random.random() / 2)
                log.info("retrying %s in %.1fs after %s", url, delay, last)
                time.sleep(delay)
        raise LLMError(f"{url} failed after {self.max_retries + 1} attempts (last error: {last})")

    def _complete(self, request: ChatRequest) -> str:
        payload: dict[str, Any] = {"model": self.model, "messages": request.message_dicts,
                                   "temperature": request.temperature, "max_tokens": request.max_tokens,
                                   "seed": request.seed}
        if request.stop:
            payload["stop"] = list(request.stop)
        if request.json_schema is not None:
            payload["response_format"] = {"type": "json_schema",
                                          "json_schema": {"name": "answer", "schema": request.schema,
                                                          "strict": True}}
        data = self._post("/chat/completions", payload)
        self._note_usage(data.get("usage") if isinstance(data, dict) else None)
        try:
            return data["choices"][0]["message"]["content"] or ""
        except (KeyError, IndexError, TypeError) as exc:
            raise LLMError(f"{self.base_url} returned an unexpected answer: {str(data)[:300]}") from exc

    def _complete_batch(self, requests: list[ChatRequest], *, progress: bool | str = False) -> list[str]:
        return map_concurrently(self._complete, requests, self.max_workers, progress)

    def logprobs(self, prefix: str, continuation: str) -> list[float]:
        full = prefix + continuation
        data = self._post("/completions", {"model": self.model, "prompt": full, "max_tokens": 1,
                                           "temperature": 0.0, "echo": True, "logprobs": 1})
        try:
            lp = data["choices"][0]["logprobs"]
            offsets, values = lp["text_offset"], lp["token_logprobs"]
        except (KeyError, IndexError, TypeError) as exc:
            raise LLMError(f"{self.base_url} does not return prompt log-probabilities (/completions with "
                           "echo and logprobs); use a vLLM server or a local model for this") from exc
        out = [float(v) for off, v in zip(offsets, values) if len(prefix) <= off < len(full) and v is not None]
        if not out:
            raise LLMError(f"{self.base_url} returned no log-probabilities for the continuation")
        return out

    def close(self) -> None:
        self._client.close()
