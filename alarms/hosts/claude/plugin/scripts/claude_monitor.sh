#!/usr/bin/env bash
# talk's Claude Code monitor. It writes peer mail to the session's inbox socket; without one,
# each stdout line reaches the session as an event and starts a turn, so it prints one short
# notice per arrival and nothing else (diagnostics go to stderr). The work is done by
# `python -m alarms.hosts.claude.monitor`; this finds the session and the interpreter.
#
# $1 is the session id as substituted into the monitor's command; when it is missing or still
# a literal "${...}", CLAUDE_CODE_SESSION_ID from the environment is used. Without either,
# the monitor idles quietly until its session ends: push is off, `talk log` still works.
#
# This file is the launcher (alarms/claude_monitor.sh, where the design names it, runs it): it
# sits in the plugin folder because a plugin installed from the repository's marketplace gets that
# folder and nothing else.
set -u
# shellcheck source=talk_python.sh
. "$(dirname "${BASH_SOURCE[0]}")/talk_python.sh"

idle() {
    echo "talk monitor: $1; not watching for mail in this session" >&2
    host="${CLAUDE_PID:-$PPID}"
    while kill -0 "$host" 2>/dev/null; do sleep 2; done
    exit 0
}

sid="${1:-}"
case "$sid" in ''|'${'*) sid="${CLAUDE_CODE_SESSION_ID:-}" ;; esac
[ -n "$sid" ] || idle "no Claude Code session id (CLAUDE_CODE_SESSION_ID is unset)"
talk_python_ok || idle "cannot find the Python talk is installed in; run \`talk install claude\`"
exec "$TALK_PYTHON" -I -m alarms.hosts.claude.monitor "$sid"
