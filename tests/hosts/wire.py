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
    trailing_text: str = ""  # every non-assistant message after the last reply, system ones too


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


def role_texts(path: str, body: dict[str, Any], role: str) -> list[str]:
    """Every text the request carries in messages of `role` ("user", "developer", ...)."""
    return [text for r, content in _messages(path, body) if r == role for text in strings(content)]


def roles_with(path: str, body: dict[str, Any], needle: str) -> list[str]:
    """The role of each message of a request that carries `needle` ("tool" for a tool's output)."""
    return [role for role, content in _messages(path, body) if any(needle in s for s in strings(content))]


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
    every: list[str] = []
    for role, content in reversed(messages):
        if role in _ASSISTANT_ROLES:
            break
        every[:0] = strings(content)
        if role == "user":
            trailing[:0] = strings(content)
    found.last_user_text = "\n".join(trailing)
    found.trailing_text = "\n".join(every)
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


def chat_tool_events(name: str, arguments: str, model: str, n: int, input_tokens: int) -> list[Event]:
    """One function call as Chat Completions streams it: the call's id and name, its arguments,
    then finish_reason "tool_calls" (what makes opencode run the tool and ask again)."""
    base = {"id": f"chatcmpl-fake{n}", "object": "chat.completion.chunk", "created": int(time.time()),
            "model": model}

    def chunk(delta: dict[str, Any], finish: str | None = None) -> Event:
        return (None, {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})

    call = {"index": 0, "id": f"call_fake{n}", "type": "function",
            "function": {"name": name, "arguments": ""}}
    return [
        chunk({"role": "assistant", "content": None, "tool_calls": [call]}),
        chunk({"tool_calls": [{"index": 0, "function": {"arguments": arguments}}]}),
        chunk({}, "tool_calls"),
        (None, {**base, "choices": [], "usage": _chat_usage("call", input_tokens)}),
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


def messages_tool_events(name: str, arguments: str, model: str, n: int, input_tokens: int) -> list[Event]:
    """One tool call as Anthropic's Messages API streams it: a tool_use block whose input
    arrives as partial JSON, then stop_reason "tool_use"."""
    start = {**messages_body("", model, n, input_tokens), "content": [], "stop_reason": None}
    start["usage"]["output_tokens"] = 1
    block = {"type": "tool_use", "id": f"toolu_fake{n}", "name": name, "input": {}}
    datas: list[dict[str, Any]] = [
        {"type": "message_start", "message": start},
        {"type": "content_block_start", "index": 0, "content_block": block},
        {"type": "content_block_delta", "index": 0,
         "delta": {"type": "input_json_delta", "partial_json": arguments}},
        {"type": "content_block_stop", "index": 0},
        {"type": "message_delta", "delta": {"stop_reason": "tool_use", "stop_sequence": None},
         "usage": {"output_tokens": 1}},
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


def offered_tool(path: str, body: dict[str, Any], names: tuple[str, ...]) -> str | None:
    """The first tool in `names` that a Messages or Chat Completions request offers, as spelled there."""
    offered = set()
    for tool in body.get("tools") or []:
        if isinstance(tool, dict):
            inner = tool.get("function") if path.endswith("/chat/completions") else tool
            if isinstance(inner, dict) and isinstance(inner.get("name"), str):
                offered.add(inner["name"])
    return next((name for name in names if name in offered), None)


# Google's Gemini API (Gemini CLI): POST /v1beta/models/MODEL:generateContent, or
# :streamGenerateContent?alt=sse, whose SSE events each carry one GenerateContentResponse.

GEMINI_ACTIONS = ("generateContent", "streamGenerateContent", "countTokens")


def gemini_action(path: str) -> str | None:
    """The Gemini API method a POST path calls (`.../models/MODEL:ACTION`), or None."""
    if "/models/" not in path or ":" not in path.rsplit("/", 1)[-1]:
        return None
    action = path.rsplit(":", 1)[-1]
    return action if action in GEMINI_ACTIONS else None


def _gemini_part_texts(part: Any) -> tuple[list[str], bool]:
    """A part's text, and whether it is a tool's result (functionResponse)."""
    if not isinstance(part, dict):
        return [], False
    if isinstance(part.get("text"), str):
        return [part["text"]], False
    response = part.get("functionResponse")
    if isinstance(response, dict):
        inner = response.get("response")
        return (strings(list(inner.values())) if isinstance(inner, dict) else strings(inner)), True
    return [], False


def gemini_messages(body: dict[str, Any]) -> list[tuple[str, list[str]]]:
    """(role, texts) of a Gemini request's contents: "model" turns are the assistant's; a user
    turn's tool results count as role "tool" and its text parts as "user"."""
    out: list[tuple[str, list[str]]] = []
    for content in body.get("contents") or []:
        if not isinstance(content, dict):
            continue
        role = str(content.get("role") or "user")
        user: list[str] = []
        tool: list[str] = []
        for part in content.get("parts") or []:
            texts, is_tool = _gemini_part_texts(part)
            (tool if is_tool else user).extend(texts)
        if role == "model":
            out.append(("model", user))
            continue
        if tool:
            out.append(("tool", tool))
        if user:
            out.append(("user", user))
    return out


def gemini_extract(body: dict[str, Any]) -> Texts:
    """`extract` for a Gemini request: the same split into conversation, system and trailing texts."""
    found = Texts()
    system = body.get("systemInstruction") or body.get("system_instruction")
    if isinstance(system, dict):
        found.system_texts += [t for p in system.get("parts") or [] for t in _gemini_part_texts(p)[0]]
    elif isinstance(system, str):
        found.system_texts.append(system)
    messages = gemini_messages(body)
    for _, texts in messages:
        found.texts.extend(texts)
    trailing: list[str] = []
    every: list[str] = []
    for role, texts in reversed(messages):
        if role in _ASSISTANT_ROLES:
            break
        every[:0] = texts
        if role == "user":
            trailing[:0] = texts
    found.last_user_text = "\n".join(trailing)
    found.trailing_text = "\n".join(every)
    return found


def _gemini_usage(input_tokens: int, output_tokens: int) -> dict[str, int]:
    return {"promptTokenCount": input_tokens, "candidatesTokenCount": output_tokens,
            "totalTokenCount": input_tokens + output_tokens}


def gemini_body(text: str, model: str, n: int, input_tokens: int) -> dict[str, Any]:
    """A whole GenerateContentResponse with one text answer."""
    return {
        "candidates": [{"content": {"role": "model", "parts": [{"text": text}]}, "finishReason": "STOP",
                        "index": 0}],
        "usageMetadata": _gemini_usage(input_tokens, len(text.split())),
        "modelVersion": model, "responseId": f"fake{n}",
    }


def gemini_events(text: str, model: str, n: int, input_tokens: int) -> list[Event]:
    """A text answer streamed a word at a time; the last chunk carries finishReason and usage."""
    pieces = _pieces(text) or [""]
    events: list[Event] = []
    for i, piece in enumerate(pieces):
        chunk: dict[str, Any] = {"candidates": [{"content": {"role": "model", "parts": [{"text": piece}]},
                                                 "index": 0}],
                                 "modelVersion": model, "responseId": f"fake{n}"}
        if i == len(pieces) - 1:
            chunk["candidates"][0]["finishReason"] = "STOP"
            chunk["usageMetadata"] = _gemini_usage(input_tokens, len(text.split()))
        events.append((None, chunk))
    return events


def gemini_tool_events(name: str, args: dict[str, Any], model: str, n: int, input_tokens: int) -> list[Event]:
    """One functionCall in a single chunk, as the Gemini API streams it."""
    call = {"functionCall": {"name": name, "args": args, "id": f"call_fake{n}"}}
    candidate = {"content": {"role": "model", "parts": [call]}, "finishReason": "STOP", "index": 0}
    chunk = {"candidates": [candidate],
             "usageMetadata": _gemini_usage(input_tokens, 1), "modelVersion": model, "responseId": f"fake{n}"}
    return [(None, chunk)]


def gemini_offers(body: dict[str, Any], name: str) -> bool:
    """Whether a Gemini request offers the function `name` among its tools."""
    for tool in body.get("tools") or []:
        for decl in (tool.get("functionDeclarations") or []) if isinstance(tool, dict) else []:
            if isinstance(decl, dict) and decl.get("name") == name:
                return True
    return False


def gemini_model(path: str) -> str:
    """The model a Gemini API path names."""
    return path.rsplit("/models/", 1)[-1].split(":", 1)[0] or "fake-model"


def gemini_json_answer(body: dict[str, Any]) -> str | None:
    """For a request that asks for JSON (Gemini CLI's side questions, such as who speaks next):
    a JSON text it accepts; None for an ordinary request."""
    config = body.get("generationConfig") or {}
    if not isinstance(config, dict) or config.get("responseMimeType") != "application/json":
        return None
    return json.dumps({"reasoning": "fake model", "next_speaker": "user", "model_choice": "flash",
                       "complexity_reasoning": "fake", "complexity_score": 1})
