#!/usr/bin/env bash
# talk's Claude Code monitor, where the design names it. The launcher itself lives in the plugin
# folder (a plugin installed from the repository's marketplace gets that folder and nothing else),
# so this runs that one: one source, and an installed plugin never needs a file outside it.
exec bash "$(dirname "${BASH_SOURCE[0]}")/hosts/claude/plugin/scripts/claude_monitor.sh" "$@"
