"""alarms.hosts.copilot.activity: how mail may enter a Copilot CLI session, from its events."""

from __future__ import annotations

from alarms.hosts.copilot.activity import Activity, Send, next_send


def fold(activity: Activity, *events: tuple[str, dict[str, object]]) -> Activity:
    for kind, data in events:
        activity.seen(kind, data)
    return activity


def test_idle_mail_starts_a_turn_and_mail_in_a_turn_waits_for_its_end() -> None:
    """A prompt sent in a turn would move a shell command that runs or starts while it waits to
    the background: mid-turn mail is the hooks' (after each tool call), or waits for the end."""
    a = Activity(trusted=True)
    assert next_send(a, prompts_open=False) is Send.ENQUEUE
    fold(a, ("user.message", {"content": "hi"}), ("assistant.turn_start", {}))
    assert next_send(a, prompts_open=False) is Send.HOLD
    fold(a, ("tool.execution_start", {"toolCallId": "t1"}), ("tool.execution_complete", {"toolCallId": "t1"}))
    assert next_send(a, prompts_open=False) is Send.HOLD
    fold(a, ("assistant.turn_end", {}), ("assistant.idle", {}))
    assert next_send(a, prompts_open=False) is Send.ENQUEUE


def test_mail_waits_while_a_tool_runs_or_a_permission_prompt_is_open() -> None:
    a = fold(Activity(trusted=True), ("tool.execution_start", {"toolCallId": "t1"}))  # a background task
    assert next_send(a, prompts_open=False) is Send.HOLD
    fold(a, ("tool.execution_complete", {"toolCallId": "t1"}))
    assert next_send(a, prompts_open=False) is Send.ENQUEUE
    fold(a, ("permission.requested", {"requestId": "p1"}))
    assert next_send(a, prompts_open=False) is Send.HOLD
    fold(a, ("permission.completed", {"requestId": "p1"}))
    assert next_send(a, prompts_open=False) is Send.ENQUEUE
    assert next_send(a, prompts_open=True) is Send.HOLD  # the server still lists one


def test_an_untrusted_folder_holds_mail_until_the_user_answered_or_typed() -> None:
    a = Activity()
    assert next_send(a, prompts_open=False) is Send.HOLD
    fold(a, ("session.info", {"infoType": "mcp"}))  # the TUI reloads MCP servers once trusted
    assert next_send(a, prompts_open=False) is Send.ENQUEUE
    b = fold(Activity(), ("user.message", {"content": "talk's own prompt"}))
    b.user_typed({"talk's own prompt"})
    assert next_send(b, prompts_open=False) is Send.HOLD  # talk's own prompt says nothing of the user
    fold(b, ("user.message", {"content": "fix the bug"}), ("assistant.idle", {}))
    b.user_typed({"talk's own prompt"})
    assert next_send(b, prompts_open=False) is Send.ENQUEUE


def test_a_prompt_shows_when_a_user_message_carries_every_marker() -> None:
    a = fold(Activity(), ("user.message", {"content": "--- id aa ... id bb"}))
    assert a.showed(["id aa", "id bb"]) and not a.showed(["id aa", "id cc"])
