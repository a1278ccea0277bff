"""Per-host alarms: turn new spool lines into a turn of the agent, exactly once.

Every alarm of a session reads that session's spool through one shared cursor, so a message
handed on by one door (a monitor, a hook, a daemon) is never handed on again by another.
Alarms import only `spool_writer` and the standard library: hooks run on every agent turn.
"""
