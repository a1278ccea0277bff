"""What the fake model reads and writes, as pure functions: no sockets here.

Three wire formats: OpenAI Responses (Codex), Chat Completions (opencode) and Anthropic
Messages (Claude Code). Event sequences follow docs research real-hosts.md section 1.
An event is `(name, data)`: name None means a bare `data:` line; data str is sent verbatim.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any

Event = tuple[str | None, dict[str, Any] | str]

MODEL_IDS = ("fake-model", "claude-opus-5-5", "gpt-5")
_SYSTEM_ROLES = {"system", "developer"}
_ASSISTANT_ROLES = {"assistant", "model"}
_TEXT_KEYS = ("text", "content", "output", "input_text")


@dataclass
class Texts:
    texts: list[str] = field(default_factory=list)
    system_texts: list[str] = field(default_factory=list)
    last_user_text: str = ""


def strings(value: Any) -> list[str]:
    """Every string under text-bearing keys of a content value (str, block list, nested tool results)."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, list):
        return [s for item in value for s in strings(item)]
    if isinstance(value, dict):
        return [s for key in _TEXT_KEYS if key in value for s in strings(value[key])]
    return []


def _messages(path: str, body: dict[str, Any]) -> list[tuple[str, Any]]:
    """(role, content) of the conversation; tool outputs count as role "tool"."""
    if path.endswith("/responses"):
        items = body.get("input", [])
        if isinstance(items, str):
            return [("user", items)]
        out = []
        for item in items:
            if not isinstance(item, dict):
                continue
            if "role" in item:
                out.append((str(item["role"]), item.get("content")))
            elif str(item.get("type", "")).endswith("_output"):
                out.append(("tool", item.get("output")))
            elif str(item.get("type", "")).endswith("_call"):
                out.append(("assistant", None))
        return out
    messages = [m for m in body.get("messages", []) if isinstance(m, dict)]
    return [(str(m.get("role", "")), m.get("content")) for m in messages]


def extract(path: str, body: dict[str, Any]) -> Texts:
    """Split a request's text into conversation texts, system texts and the trailing user turn.

    `last_user_text` joins the user messages after the last assistant message: the new
    input of this request, as opposed to history that every later request repeats.
    """
    found = Texts()
    found.system_texts += strings(body.get("system")) + strings(body.get("instructions"))
    messages = _messages(path, body)
    for role, content in messages:
        (found.system_texts if role in _SYSTEM_ROLES else found.texts).extend(strings(content))
    trailing: list[str] = []
    for role, content in reversed(messages):
        if role in _ASSISTANT_ROLES:
            break
        if role == "user":
            trailing[:0] = strings(content)
    found.last_user_text = "\n".join(trailing)
    return found


def _pieces(text: str) -> list[str]:
    words = text.split(" ")
    return [w + (" " if i < len(words) - 1 else "") for i, w in enumerate(words)]


def responses_events(text: str, model: str, n: int, input_tokens: int) -> list[Event]:
    rid, mid = f"resp_fake{n}", f"msg_fake{n}"
    part = {"type": "output_text", "text": text, "annotations": []}
    item = {"id": mid, "type": "message", "role": "assistant", "status": "completed", "content": [part]}
    usage = {
        "input_tokens": input_tokens, "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": len(text.split()), "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": input_tokens + len(text.split()),
    }

    def response(status: str, output: list[Any], **more: Any) -> dict[str, Any]:
        return {"id": rid, "object": "response", "created_at": int(time.time()), "status": status,
                "model": model, "output": output, **more}

    ref = {"item_id": mid, "output_index": 0, "content_index": 0}
    datas: list[dict[str, Any]] = [
        {"type": "response.created", "response": response("in_progress", [])},
        {"type": "response.in_progress", "response": response("in_progress", [])},
        {"type": "response.output_item.added", "output_index": 0,
         "item": {**item, "status": "in_progress", "content": []}},
        {"type": "response.content_part.added", **ref, "part": {**part, "text": ""}},
        *({"type": "response.output_text.delta", **ref, "delta": p} for p in _pieces(text)),
        {"type": "response.output_text.done", **ref, "text": text},
        {"type": "response.content_part.done", **ref, "part": part},
        {"type": "response.output_item.done", "output_index": 0, "item": item},
        {"type": "response.completed", "response": response("completed", [item], usage=usage)},
    ]
    return [(d["type"], {**d, "sequence_number": i}) for i, d in enumerate(datas)]


def responses_tool_events(name: str, arguments: str, model: str, n: int, input_tokens: int) -> list[Event]:
    """One function call as the Responses API streams it: the item, its arguments, the end."""
    rid, fid = f"resp_fake{n}", f"fc_fake{n}"
    item = {"id": fid, "type": "function_call", "status": "completed", "arguments": arguments,
            "call_id": f"call_fake{n}", "name": name}
    usage = {
        "input_tokens": input_tokens, "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": 1, "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": input_tokens + 1,
    }

    def response(status: str, output: list[Any], **more: Any) -> dict[str, Any]:
        return {"id": rid, "object": "response", "created_at": int(time.time()), "status": status,
                "model": model, "output": output, **more}

    ref = {"item_id": fid, "output_index": 0}
    datas: list[dict[str, Any]] = [
        {"type": "response.created", "response": response("in_progress", [])},
        {"type": "response.in_progress", "response": response("in_progress", [])},
        {"type": "response.output_item.added", "output_index": 0,
         "item": {**item, "status": "in_progress", "arguments": ""}},
        {"type": "response.function_call_arguments.delta", **ref, "delta": arguments},
        {"type": "response.function_call_arguments.done", **ref, "arguments": arguments},
        {"type": "response.output_item.done", "output_index": 0, "item": item},
        {"type": "response.completed", "response": response("completed", [item], usage=usage)},
    ]
    return [(d["type"], {**d, "sequence_number": i}) for i, d in enumerate(datas)]


def responses_body(text: str, model: str, n: int, input_tokens: int) -> dict[str, Any]:
    completed = responses_events(text, model, n, input_tokens)[-1][1]
    assert isinstance(completed, dict)
    return dict(completed["response"])


def _chat_usage(text: str, input_tokens: int) -> dict[str, int]:
    out = len(text.split())
    return {"prompt_tokens": input_tokens, "completion_tokens": out, "total_tokens": input_tokens + out}


def chat_events(text: str, model: str, n: int, input_tokens: int) -> list[Event]:
    base = {"id": f"chatcmpl-fake{n}", "object": "chat.completion.chunk", "created": int(time.time()),
            "model": model}

    def chunk(delta: dict[str, Any], finish: str | None = None) -> Event:
        return (None, {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})

    return [
        chunk({"role": "assistant", "content": ""}),
        *(chunk({"content": p}) for p in _pieces(text)),
        chunk({}, "stop"),
        (None, {**base, "choices": [], "usage": _chat_usage(text, input_tokens)}),
        (None, "[DONE]"),
    ]


def chat_body(text: str, model: str, n: int, input_tokens: int) -> dict[str, Any]:
    message = {"role": "assistant", "content": text}
    return {
        "id": f"chatcmpl-fake{n}", "object": "chat.completion", "created": int(time.time()), "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
        "usage": _chat_usage(text, input_tokens),
    }


def messages_body(text: str, model: str, n: int, input_tokens: int) -> dict[str, Any]:
    return {
        "id": f"msg_fake{n}", "type": "message", "role": "assistant", "model": model,
        "content": [{"type": "text", "text": text}], "stop_reason": "end_turn", "stop_sequence": None,
        "usage": {"input_tokens": input_tokens, "output_tokens": len(text.split()),
                  "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0},
    }


def messages_events(text: str, model: str, n: int, input_tokens: int) -> list[Event]:
    start = {**messages_body("", model, n, input_tokens), "content": [], "stop_reason": None}
    start["usage"]["output_tokens"] = 1
    datas: list[dict[str, Any]] = [
        {"type": "message_start", "message": start},
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        {"type": "ping"},
        *({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": p}}
          for p in _pieces(text)),
        {"type": "content_block_stop", "index": 0},
        {"type": "message_delta", "delta": {"stop_reason": "end_turn", "stop_sequence": None},
         "usage": {"output_tokens": len(text.split())}},
        {"type": "message_stop"},
    ]
    return [(d["type"], d) for d in datas]


def sse(event: Event) -> bytes:
    name, data = event
    payload = data if isinstance(data, str) else json.dumps(data)
    head = f"event: {name}\n" if name else ""
    return f"{head}data: {payload}\n\n".encode()


def models_list() -> dict[str, Any]:
    """Both OpenAI's and Anthropic's shape of a model list, in one body."""
    data = [{"id": m, "object": "model", "type": "model", "display_name": m, "created": 0,
             "created_at": "2026-01-01T00:00:00Z", "owned_by": "fake"} for m in MODEL_IDS]
    return {"object": "list", "data": data, "has_more": False, "first_id": MODEL_IDS[0],
            "last_id": MODEL_IDS[-1]}
