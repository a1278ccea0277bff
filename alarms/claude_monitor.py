"""Kept for set-ups installed before the move to `alarms.hosts.claude.monitor`; `talk install`
rewrites them."""

if __name__ == "__main__":
    import runpy

    runpy.run_module("alarms.hosts.claude.monitor", run_name="__main__", alter_sys=True)
