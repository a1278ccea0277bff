"""Per-host alarms: turn new spool lines into a turn of the agent, exactly once.

Every alarm of a session reads that session's spool through one shared cursor, so a message
handed on by one door (a monitor, a hook, a daemon) is never handed on again by another.
Alarms import only `spool_writer`, the leaf package `durable` and the standard library: hooks
run on every agent turn. They never decrypt nor talk to the relay, so they never import `keys`:
what they show comes from the spool line the follower wrote.
"""
