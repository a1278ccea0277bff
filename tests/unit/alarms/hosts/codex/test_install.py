"""What `talk doctor` reads back from Codex: the trust key of each of talk's hooks, as Codex names
them, and the keys config.toml records trust for."""

from __future__ import annotations

from pathlib import Path

import pytest

from alarms.hosts.codex.install import handler_for, talk_hooks, trust_key, trusted_keys
from durable.errors import UserError

HOOKS = Path("/c/hooks.json")
FOREIGN = {"type": "command", "command": "/usr/bin/notify-me"}


def test_trust_keys_name_the_file_the_event_in_snake_case_and_the_position() -> None:
    assert trust_key(HOOKS, "UserPromptSubmit", 1, 0) == "/c/hooks.json:user_prompt_submit:1:0"
    assert trust_key(HOOKS, "Stop", 0, 2) == "/c/hooks.json:stop:0:2"


def test_talk_hooks_are_found_where_they_are_beside_others() -> None:
    ours = handler_for("/py -I -S /a/alarms/codex_hook.py")
    doc = {"hooks": {"Stop": [{"hooks": [FOREIGN]}, {"hooks": [FOREIGN, ours]}],
                     "PreToolUse": [{"hooks": [ours]}], "SessionStart": "not a list"}}
    assert talk_hooks(doc, HOOKS) == {"Stop": {"/c/hooks.json:stop:1:1": ours["command"]}}
    with pytest.raises(ValueError):
        talk_hooks({"hooks": []}, HOOKS)


def test_trusted_keys_are_those_with_a_hash(tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    assert trusted_keys(config) == set()
    config.write_text('model = "x"\n[hooks.state."a:stop:0:0"]\ntrusted_hash = "sha256:1"\n'
                      '[hooks.state."b:stop:0:0"]\nenabled = true\n')
    assert trusted_keys(config) == {"a:stop:0:0"}
    config.write_text("[hooks.state\n")
    with pytest.raises(UserError, match=r"config\.toml"):
        trusted_keys(config)
