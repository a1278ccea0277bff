"""`python -m alarms.opencode`: the opencode door daemon (`alarms.opencode.daemon`), as doors
started before the move to `alarms/opencode/` were spawned; `talk alarm opencode` now runs
`-m alarms.opencode.daemon`."""

from alarms.opencode.daemon import main

main()
