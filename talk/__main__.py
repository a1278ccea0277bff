"""Entry point: map every talk error to its one-line message and exit code, never a traceback."""

from __future__ import annotations

import sys
from collections.abc import Callable


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    from talk.fastlane import route

    call = route(args)
    sys.exit(_guarded(call if call is not None else lambda: _typer(args)))


def _typer(args: list[str]) -> int:
    import typer
    import typer.main

    from talk.cli import app

    try:
        code = typer.main.get_command(app).main(args=args, prog_name="talk", standalone_mode=False)
    except typer.TyperException as exc:  # usage errors: 1, not click's 2 (2 means "refused")
        show = getattr(exc, "show", None)
        if show is not None:
            show()
        else:
            sys.stderr.write(f"talk: error: {exc}\n")
        return 1
    except typer.Abort:
        sys.stderr.write("talk: aborted\n")
        return 130
    return code if isinstance(code, int) else 0


def _guarded(call: Callable[[], int | None]) -> int:
    from keys.errors import TalkError

    try:
        return call() or 0
    except TalkError as exc:
        sys.stderr.write(f"talk: error: {exc.message}\n")
        return exc.exit_code
    except KeyboardInterrupt:
        sys.stderr.write("talk: interrupted\n")
        return 130
    except BrokenPipeError:
        return 0  # the reader of our stdout went away (e.g. `| head`)
    except OSError as exc:  # this machine's files: a bad TALK_HOME, a full disk, permissions
        where = f": {exc.filename}" if exc.filename else ""
        sys.stderr.write(f"talk: error: {exc.strerror or exc}{where}; check TALK_HOME, its permissions "
                         "and the free disk space\n")
        return 1


if __name__ == "__main__":
    main()
