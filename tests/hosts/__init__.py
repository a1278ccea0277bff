"""Harness for running the real agent hosts (opencode, Codex, Claude Code) in tests.

npm        host_bin(), host_env(): the pinned programs and a clean environment for them
procs      ProcessGroup, kill_tree(), reap_home(), wait_for_text(): nothing outlives a test
fake_model FakeModel: OpenAI Responses, Chat Completions and Anthropic Messages on loopback
wire       the fake model's pure parts: text extraction and SSE event sequences
configs    each host's config pointed at the fake model
opencode   `opencode serve` and its HTTP API
"""
