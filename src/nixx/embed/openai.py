"""The `openai` embedder: any OpenAI-compatible `/v1/embeddings` endpoint.

llama.cpp (`llama-server --embeddings`), Ollama (`http://127.0.0.1:11434/v1`), OpenAI, any
gateway. Texts go out in batches of `batch_size`; connection errors, 5xx and 429 are retried
a bounded number of times with exponential backoff (honouring `Retry-After`); the vectors come
back in input order (sorted by the `index` the server returns) and L2-normalised.
"""

from __future__ import annotations

import base64
import contextlib
import threading
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import httpx
import numpy as np

from nixx.embed.base import Embedder
from nixx.errors import BackendError, BackendUnavailable
from nixx.secret import reveal

if TYPE_CHECKING:
    from pydantic import SecretStr

_RETRY_STATUS = {429, 500, 502, 503, 504}
_MAX_RETRY_AFTER = 30.0


class OpenAIEmbedder(Embedder):
    """Embeddings from an OpenAI-compatible HTTP endpoint. Thread-safe (one pooled client)."""

    def __init__(
        self,
        base_url: str,
        model: str,
        api_key: SecretStr | str | None = None,
        batch_size: int = 32,
        *,
        timeout: float = 60.0,
        max_retries: int = 3,
        backoff: float = 0.25,
        dim: int | None = None,
    ) -> None:
        if batch_size < 1:
            raise ValueError("batch_size must be at least 1")
        self.base_url = base_url.rstrip("/")
        self.url = f"{self.base_url}/embeddings"
        self.model = model
        self.batch_size = batch_size
        self.max_retries = max_retries
        self.backoff = backoff
        self._dim = dim
        self._dim_lock = threading.Lock()
        key = reveal(api_key)  # the one place the embeddings key is revealed
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        self._client = httpx.Client(timeout=timeout, headers=headers)

    # ---- interface -----------------------------------------------------------------
    @property
    def dim(self) -> int:  # type: ignore[override]
        """The vectors' dimension: known after the first call, else probed with one text."""
        if self._dim is None:
            self._post(["dimension probe"])
        assert self._dim is not None
        return self._dim

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        if isinstance(texts, str):
            raise TypeError("embed() takes a sequence of texts; use embed_one() for one text")
        if len(texts) == 0:
            return np.zeros((0, self.dim), dtype=np.float32)
        parts = [
            self._post(list(texts[i : i + self.batch_size]))
            for i in range(0, len(texts), self.batch_size)
        ]
        return np.concatenate(parts, axis=0)

    def close(self) -> None:
        self._client.close()

    def __enter__(self) -> OpenAIEmbedder:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---- one request ---------------------------------------------------------------
    def _post(self, batch: list[str]) -> np.ndarray:
        # OpenAI rejects empty strings; a single space embeds as "nothing" everywhere
        payload = {"model": self.model, "input": [t if t else " " for t in batch]}
        attempt = 0
        while True:
            try:
                response = self._client.post(self.url, json=payload)
            except httpx.TransportError as exc:
                if attempt < self.max_retries:
                    self._sleep(attempt, None)
                    attempt += 1
                    continue
                raise BackendUnavailable(
                    f"no embeddings backend answers at {self.url} ({_describe(exc)}). Start it, "
                    "or point NIXX_EMBED_BASE_URL at a running OpenAI-compatible /v1 endpoint "
                    "(or use NIXX_EMBED_PROVIDER=local).",
                    url=self.url,
                ) from None
            if response.status_code in _RETRY_STATUS and attempt < self.max_retries:
                self._sleep(attempt, response.headers.get("Retry-After"))
                attempt += 1
                continue
            if response.status_code != 200:
                raise self._http_error(response)
            return self._parse(response, len(batch))

    def _sleep(self, attempt: int, retry_after: str | None) -> None:
        delay = self.backoff * (2**attempt)
        if retry_after:
            with contextlib.suppress(ValueError):  # an HTTP date: keep our own delay
                delay = max(delay, min(float(retry_after), _MAX_RETRY_AFTER))
        time.sleep(delay)

    def _http_error(self, response: httpx.Response) -> BackendError:
        status = response.status_code
        message = _error_message(response)
        hint = ""
        if status in (401, 403):
            hint = " Check NIXX_EMBED_API_KEY."
        elif status == 404:
            hint = (
                f" Check NIXX_EMBED_BASE_URL (it should end in /v1) and that model "
                f"{self.model!r} exists there (NIXX_EMBED_MODEL)."
            )
        text = f"embeddings backend at {self.url} answered {status}: {message}.{hint}"
        if status in _RETRY_STATUS:
            text = (
                f"embeddings backend at {self.url} still answered {status} after "
                f"{self.max_retries + 1} attempts: {message}"
            )
        return BackendError(text, url=self.url, status=status)

    def _parse(self, response: httpx.Response, expected: int) -> np.ndarray:
        try:
            body = response.json()
            items = body["data"]
            if not isinstance(items, list):
                raise TypeError("'data' is not a list")
            items = sorted(items, key=lambda item: int(item["index"]))
            rows = [_vector(item["embedding"]) for item in items]
        except (ValueError, KeyError, TypeError, IndexError) as exc:
            raise BackendError(
                f"embeddings backend at {self.url} sent a malformed body ({exc}): "
                f"{response.text[:200]!r}",
                url=self.url,
            ) from None
        indices = [int(item["index"]) for item in items]
        if indices != list(range(expected)):
            raise BackendError(
                f"embeddings backend at {self.url} returned {len(items)} vectors "
                f"(indices {indices[:10]}) for {expected} inputs",
                url=self.url,
            )
        dims = {len(r) for r in rows}
        if len(dims) != 1 or 0 in dims:
            raise BackendError(
                f"embeddings backend at {self.url} returned vectors of sizes {sorted(dims)}",
                url=self.url,
            )
        vectors = np.asarray(rows, dtype=np.float32)
        dim = vectors.shape[1]
        with self._dim_lock:
            if self._dim is None:
                self._dim = dim
            elif self._dim != dim:
                raise BackendError(
                    f"embeddings backend at {self.url} returned {dim}-d vectors, expected "
                    f"{self._dim} (did the model behind it change?)",
                    url=self.url,
                )
        if not np.isfinite(vectors).all():
            raise BackendError(
                f"embeddings backend at {self.url} returned non-finite values", url=self.url
            )
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        np.maximum(norms, 1e-12, out=norms)
        vectors /= norms
        return vectors


def _vector(value: Any) -> list[float] | np.ndarray:
    if isinstance(value, str):  # encoding_format=base64 (some servers default to it)
        return np.frombuffer(base64.b64decode(value), dtype="<f4")
    if not isinstance(value, list):
        raise TypeError("'embedding' is neither a list nor base64")
    return value


def _error_message(response: httpx.Response) -> str:
    try:
        body = response.json()
    except ValueError:
        return response.text.strip()[:300] or response.reason_phrase
    if isinstance(body, dict):
        err = body.get("error")
        if isinstance(err, dict) and err.get("message"):
            return str(err["message"])
        if isinstance(err, str):
            return err
        if body.get("detail"):
            return str(body["detail"])
    return response.text.strip()[:300]


def _describe(exc: httpx.TransportError) -> str:
    if isinstance(exc, httpx.ConnectError):
        return "connection refused or host unreachable"
    if isinstance(exc, httpx.TimeoutException):
        return "timed out"
    return type(exc).__name__
