"""`python -m alarms.opencode`: the opencode door, a daemon that follows one opencode server's
session and posts peer mail into it (`alarms.hosts.opencode.daemon`). `talk door opencode`
starts it; this path is the one the design names and doors started before the move ran."""

from alarms.hosts.opencode.daemon import main

main()
