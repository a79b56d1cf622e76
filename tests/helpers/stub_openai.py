"""A stub OpenAI-compatible server on 127.0.0.1 for tests (judge, sampler engines).

Speaks `POST /v1/chat/completions`, `POST /v1/completions` and `GET /v1/models` in the OpenAI
wire format, including `n` choices, `logprobs`, `max_tokens` (finish_reason "length") and
`stop` strings. Runs in a background thread; every request is recorded.

What it answers, in order of precedence:
- `script`: a list consumed one entry per request: None (normal reply), an int (that HTTP error
  status), "malformed" (a 200 whose body is not JSON), "drop" (close the connection without a
  reply), or a float (sleep that many seconds, then reply normally);
- `fail_first=k`: the first k requests get HTTP `fail_status`;
- `delay_s`: every request sleeps first (a sleep is cut short when the server stops);
- `hook(request_body, path, choice_index) -> str | dict`: computes each choice; a dict may give
  "text", "finish_reason", "tokens" (list of str) and "logprobs" (list of float);
- else `responses`: canned texts, cycled over all choices of all requests.

`ignore_n=True` answers every request with ONE choice whatever its `n`, and `no_logprobs=True`
never returns logprobs, as `transformers serve` does (it reports only `usage`).

Tokens are characters by default (logprob `default_logprob` each); with
`return_tokens_as_token_ids` in the request (vLLM's flag) each token is rendered "token_id:<ord>".

Use as a context manager or through the `stub_openai` fixture:

    with StubOpenAI(responses=["Hello"]) as srv:
        post(srv.base_url + "/chat/completions", ...)   # base_url ends with /v1
        assert srv.requests[0]["body"]["model"] == "m"
"""

from __future__ import annotations

import itertools
import json
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

Hook = Callable[[dict[str, Any], str, int], "str | dict[str, Any]"]


class StubOpenAI:
    def __init__(
        self,
        responses: list[str] | None = None,
        hook: Hook | None = None,
        *,
        delay_s: float = 0.0,
        fail_first: int = 0,
        fail_status: int = 500,
        script: list[Any] | None = None,
        default_logprob: float = -0.5,
        model: str = "stub-model",
        ignore_n: bool = False,
        no_logprobs: bool = False,
    ) -> None:
        self.responses = list(responses or ["Hello from the stub."])
        self.hook = hook
        self.delay_s = delay_s
        self.fail_first = fail_first
        self.fail_status = fail_status
        self.script = list(script or [])
        self.default_logprob = default_logprob
        self.model = model
        self.ignore_n, self.no_logprobs = ignore_n, no_logprobs
        self.requests: list[dict[str, Any]] = []  # {"path", "headers", "body"} per request
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._canned = itertools.count()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle ------------------------------------------------------------------------------
    @property
    def port(self) -> int:
        assert self._server is not None, "server not started"
        return self._server.server_address[1]

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self) -> StubOpenAI:
        handler = type("Handler", (_Handler,), {"stub": self})
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, args=(0.05,), daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()  # wakes handlers sleeping in a delay
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> StubOpenAI:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def n_requests(self) -> int:
        with self._lock:
            return len(self.requests)

    # -- behaviour ------------------------------------------------------------------------------
    def _record(self, path: str, headers: dict[str, str], body: Any) -> Any:
        """Record the request; return the action for it (None = normal reply)."""
        with self._lock:
            index = len(self.requests)
            self.requests.append({"path": path, "headers": headers, "body": body})
            if self.script:
                return self.script.pop(0)
            if index < self.fail_first:
                return self.fail_status
            return None

    def _sleep(self, seconds: float) -> None:
        self._stop.wait(seconds)

    def _choice_reply(self, body: dict[str, Any], path: str, index: int) -> dict[str, Any]:
        if self.hook is not None:
            out = self.hook(body, path, index)
        else:
            out = self.responses[next(self._canned) % len(self.responses)]
        reply = {"text": out} if isinstance(out, str) else dict(out)
        text = reply.get("text", "")
        tokens = list(reply.get("tokens") or list(text))
        logprobs = list(reply.get("logprobs") or [self.default_logprob] * len(tokens))
        finish = reply.get("finish_reason", "stop")
        stops = body.get("stop") or []
        for stop in [stops] if isinstance(stops, str) else stops:
            joined = "".join(tokens)
            cut = joined.find(stop)
            if stop and cut >= 0:
                # Truncate to the whole tokens before the stop string (OpenAI drops the stop).
                kept, length = [], 0
                for tok in tokens:
                    if length + len(tok) > cut:
                        break
                    kept.append(tok)
                    length += len(tok)
                tokens, logprobs, finish = kept, logprobs[: len(kept)], "stop"
        max_tokens = body.get("max_tokens") or body.get("max_completion_tokens")
        if isinstance(max_tokens, int) and len(tokens) > max_tokens:
            tokens, logprobs, finish = tokens[:max_tokens], logprobs[:max_tokens], "length"
        return {"text": "".join(tokens), "tokens": tokens, "logprobs": logprobs, "finish": finish}

    def build_response(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        n = 1 if self.ignore_n else int(body.get("n") or 1)
        as_ids = bool(body.get("return_tokens_as_token_ids"))
        choices = []
        n_tokens = 0
        for i in range(n):
            r = self._choice_reply(body, path, i)
            n_tokens += len(r["tokens"])
            toks = [f"token_id:{ord(t[0]) if t else 0}" if as_ids else t for t in r["tokens"]]
            if path.endswith("/chat/completions"):
                choice: dict[str, Any] = {
                    "index": i,
                    "message": {"role": "assistant", "content": r["text"]},
                    "finish_reason": r["finish"],
                    "logprobs": None,
                }
                if body.get("logprobs") and not self.no_logprobs:
                    choice["logprobs"] = {
                        "content": [
                            {
                                "token": t,
                                "logprob": lp,
                                "bytes": list(t.encode()),
                                "top_logprobs": [],
                            }
                            for t, lp in zip(toks, r["logprobs"])
                        ]
                    }
            else:
                choice = {
                    "index": i,
                    "text": r["text"],
                    "finish_reason": r["finish"],
                    "logprobs": None,
                }
                if body.get("logprobs") is not None and not self.no_logprobs:
                    offsets = list(itertools.accumulate([0] + [len(t) for t in r["tokens"][:-1]]))
                    choice["logprobs"] = {
                        "tokens": toks,
                        "token_logprobs": r["logprobs"],
                        "top_logprobs": None,
                        "text_offset": offsets if r["tokens"] else [],
                    }
            choices.append(choice)
        kind = "chat.completion" if path.endswith("/chat/completions") else "text_completion"
        return {
            "id": f"stub-{len(self.requests)}",
            "object": kind,
            "created": int(time.time()),
            "model": body.get("model", self.model),
            "choices": choices,
            "usage": {"prompt_tokens": 0, "completion_tokens": n_tokens, "total_tokens": n_tokens},
        }


class _Handler(BaseHTTPRequestHandler):
    stub: StubOpenAI
    protocol_version = "HTTP/1.1"

    def log_message(self, *args: Any) -> None:  # keep test output clean
        pass

    def _send(self, status: int, payload: bytes, ctype: str = "application/json") -> None:
        try:
            self.send_response(status)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (timeout tests): nothing to answer

    def _error(self, status: int, message: str) -> None:
        body = {"error": {"message": message, "type": "stub_error", "code": status}}
        self._send(status, json.dumps(body).encode())

    def do_GET(self) -> None:
        if self.path.rstrip("/").endswith("/v1/models"):
            data = {"object": "list", "data": [{"id": self.stub.model, "object": "model"}]}
            self._send(200, json.dumps(data).encode())
        else:
            self._error(404, f"no route {self.path}")

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length)
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            body = None
        action = self.stub._record(self.path, dict(self.headers), body)
        if isinstance(action, float):
            self.stub._sleep(action)
            action = None
        elif self.stub.delay_s:
            self.stub._sleep(self.stub.delay_s)
        if action == "drop":
            self.close_connection = True
            self.connection.close()
            return
        if isinstance(action, int):
            return self._error(action, f"injected HTTP {action}")
        if action == "malformed":
            return self._send(200, b"this is { not json", "text/plain")
        if not isinstance(body, dict):
            return self._error(400, "request body is not a JSON object")
        path = self.path.rstrip("/")
        if not (path.endswith("/v1/chat/completions") or path.endswith("/v1/completions")):
            return self._error(404, f"no route {self.path}")
        if path.endswith("/chat/completions") and not isinstance(body.get("messages"), list):
            return self._error(400, "messages must be a list")
        self._send(200, json.dumps(self.stub.build_response(path, body)).encode())


@pytest.fixture
def stub_openai() -> Iterator[StubOpenAI]:
    """A started stub server; reconfigure it by setting attributes (responses, hook, ...)."""
    with StubOpenAI() as srv:
        yield srv
