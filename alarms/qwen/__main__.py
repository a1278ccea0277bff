"""`python -m alarms.qwen`: the Qwen Code door (`alarms.qwen.daemon`), as Qwen Code settings
installed before the move to `alarms/qwen/` start it; `talk install qwen` rewrites them."""

from alarms.qwen.daemon import main

main()
