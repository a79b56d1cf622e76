"""A hub id (not a local folder): load it from the HF cache, download it as transformers would, or
fail at once.

Without this, an uncached id with the hub unreachable spends ~50 s in transformers' retries
before its error (measured: `tests/test_validation.py::test_uncached_hub_id_fails_at_once`
reproduces it on the code before this module). `hub_load_kwargs` decides first, in well under a
second: cached -> load from the cache (no network when the hub is unreachable); not cached and
the hub reachable -> transformers downloads it into the HF cache (as `from_pretrained` always
does; logged); not cached and offline (HF_HUB_OFFLINE=1, or the hub does not answer within
`PROBE_TIMEOUT_S`) -> one HubUnavailableError saying how to download it.
"""

from __future__ import annotations

import os
import socket
from typing import Any
from urllib.parse import urlparse

from vibethinker.log import get_logger

log = get_logger("models.hub")

# Seconds to wait for a TCP connection to the hub before calling it unreachable. Our choice:
# long enough for a slow network, short next to the retries it replaces.
PROBE_TIMEOUT_S = 3.0


class HubUnavailableError(FileNotFoundError):
    """A hub id that is not cached while the hub is offline or unreachable."""


def hub_endpoint() -> str:
    """The hub address transformers would use (HF_ENDPOINT, else huggingface.co)."""
    return os.environ.get("HF_ENDPOINT", "").rstrip("/") or "https://huggingface.co"


def is_offline() -> bool:
    return any(
        os.environ.get(k, "0").lower() not in ("", "0", "false", "no", "off")
        for k in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")
    )


def hub_reachable(endpoint: str, timeout: float = PROBE_TIMEOUT_S) -> bool:
    """Whether a TCP connection to the endpoint's host opens within `timeout` seconds."""
    url = urlparse(endpoint)
    port = url.port or (443 if url.scheme == "https" else 80)
    try:
        with socket.create_connection((url.hostname or "", port), timeout=timeout):
            return True
    except OSError:
        return False


def is_cached(repo_id: str) -> bool:
    """Whether the model's config.json is in the HF cache (a downloaded model)."""
    from huggingface_hub import try_to_load_from_cache

    try:
        return isinstance(try_to_load_from_cache(repo_id, "config.json"), str)
    except Exception:  # a malformed id: let from_pretrained say what is wrong with it
        return False


def hub_load_kwargs(repo_id: str) -> dict[str, Any]:
    """Extra `from_pretrained` kwargs for a hub id: {} or {"local_files_only": True}; raises
    HubUnavailableError at once for an uncached id when the hub is offline or unreachable."""
    cached = is_cached(repo_id)
    if is_offline():
        if cached:
            return {}
        why = "HF_HUB_OFFLINE/TRANSFORMERS_OFFLINE is set"
    else:
        endpoint = hub_endpoint()
        if hub_reachable(endpoint):
            if not cached:
                log.info(
                    "%s is not in the HF cache: downloading it from %s (as transformers "
                    "does; HF_HOME sets where)",
                    repo_id,
                    endpoint,
                )
            return {}
        if cached:
            log.info("the hub (%s) is unreachable: loading %s from the HF cache", endpoint, repo_id)
            return {"local_files_only": True}
        why = f"the hub ({endpoint}) is unreachable"
    raise HubUnavailableError(
        f"could not load hub model {repo_id!r}: it is not a local folder, not in the Hugging Face "
        f"cache, and {why}. Download it first where the hub is reachable (`hf download {repo_id} "
        "--local-dir DIR`) and pass the folder DIR instead"
    )
