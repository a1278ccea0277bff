"""Entry point: map every talk error to its one-line message and exit code, never a traceback."""

from __future__ import annotations

import sys
from collections.abc import Callable


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    from talk.fastlane import BRIEF, route

    call = route(args)
    if call is None:
        sys.exit(_guarded(lambda: _typer(args)))
    code = _guarded(call)
    if argv is None and args[0] in BRIEF:
        _leave(code)
    sys.exit(code)


def _leave(code: int) -> None:
    """Exit without the interpreter's teardown, which frees every module one by one (~20 ms,
    an eighth of a `talk send`). Safe for the brief commands only (`fastlane.BRIEF`; not the
    relay): they run no thread, and everything they wrote went through os-level writes they
    synced, or files they closed; stdout and stderr are flushed here."""
    import contextlib
    import os

    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(BrokenPipeError, ValueError):  # reader gone, or stream closed
            stream.flush()
    os._exit(code)


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
            _error(str(exc))
        return 1
    except typer.Abort:
        sys.stderr.write("talk: aborted\n")
        return 130
    return code if isinstance(code, int) else 0


def _guarded(call: Callable[[], int | None]) -> int:
    from durable.errors import TalkError

    try:
        return call() or 0
    except TalkError as exc:
        _error(exc.message)
        return exc.exit_code
    except KeyboardInterrupt:
        sys.stderr.write("talk: interrupted\n")
        return 130
    except BrokenPipeError:
        return 0  # the reader of our stdout went away (e.g. `| head`)
    except OSError as exc:  # this machine's files: a bad TALK_HOME, a full disk, permissions
        where = f": {exc.filename}" if exc.filename else ""
        _error(f"{exc.strerror or exc}{where}; check TALK_HOME, its permissions and the free disk space")
        return 1


def _error(message: str) -> None:
    """An error's line: it may quote a relay, a peer or a file name, so it is shown as peer text is."""
    from durable.printable import printable

    sys.stderr.write(f"talk: error: {printable(message, lines=True)}\n")


if __name__ == "__main__":
    main()
