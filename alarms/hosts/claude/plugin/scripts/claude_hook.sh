#!/usr/bin/env bash
# talk's Claude Code hook (SessionStart, UserPromptSubmit, PostToolUse, Stop): registers the
# session and hands on mail the monitor has not. The payload arrives on stdin and goes to
# `python -m alarms.hosts.claude.hook` unchanged.
set -u
here="$(dirname "${BASH_SOURCE[0]}")"
# shellcheck source=talk_python.sh
. "$here/talk_python.sh"
if ! talk_python_ok; then
    echo "talk: cannot find the Python talk is installed in; run \`talk install claude\`" >&2
    exit 0  # no output: the turn goes on without mail rather than failing
fi
exec "$TALK_PYTHON" -I -m alarms.hosts.claude.hook
