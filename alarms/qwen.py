"""`python -m alarms.qwen`: the Qwen Code door (`alarms.hosts.qwen.daemon`), as Qwen Code settings
installed before the move to `alarms/hosts/qwen/` start it; `talk install qwen` rewrites them."""

from alarms.hosts.qwen.daemon import main

main()
