"""Entry point: map every talk error to its one-line message and exit code, never a traceback."""

from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> None:
    import typer
    import typer.main

    from keys.errors import TalkError
    from talk.cli import app

    command = typer.main.get_command(app)
    try:
        code = command.main(args=argv, prog_name="talk", standalone_mode=False)
    except TalkError as exc:
        sys.stderr.write(f"talk: error: {exc.message}\n")
        sys.exit(exc.exit_code)
    except typer.TyperException as exc:  # usage errors: 1, not click's 2 (2 means "refused")
        show = getattr(exc, "show", None)
        if show is not None:
            show()
        else:
            sys.stderr.write(f"talk: error: {exc}\n")
        sys.exit(1)
    except typer.Abort:
        sys.stderr.write("talk: aborted\n")
        sys.exit(130)
    except BrokenPipeError:
        sys.exit(0)  # the reader of our stdout went away (e.g. `| head`)
    sys.exit(code if isinstance(code, int) else 0)


if __name__ == "__main__":
    main()
