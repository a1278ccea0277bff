"""talk.uvicorn_cli: uvicorn's server imports without its command line, and the whole package is
still there for code that asks for more. Each case runs in a fresh interpreter, where uvicorn
has not been imported yet."""

from __future__ import annotations

import subprocess
import sys


def _run(code: str) -> str:
    script = "import sys\nfrom talk import uvicorn_cli\nuvicorn_cli.defer()\n" + code
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_the_server_and_its_protocols_import_without_click() -> None:
    out = _run("import uvicorn.config, uvicorn.server, uvicorn.lifespan.on\n"
               "import uvicorn.protocols.http.httptools_impl\n"
               "from uvicorn import Config, Server\n"
               "print(Config is uvicorn.config.Config, Server is uvicorn.server.Server,\n"
               "      'click' in sys.modules)")
    assert out == "True True False"


def test_any_other_name_brings_the_whole_package() -> None:
    out = _run("import uvicorn\nfrom uvicorn import run\n"
               "print(callable(run), bool(uvicorn.__version__), 'click' in sys.modules, run.__module__)")
    assert out == "True True True uvicorn.main"


def test_a_missing_name_is_an_attribute_error() -> None:
    out = _run("import uvicorn\ntry:\n    uvicorn.no_such_name\nexcept AttributeError as e:\n    print(e)")
    assert out == "module 'uvicorn' has no attribute 'no_such_name'"


def test_nothing_changes_once_uvicorn_is_imported() -> None:
    code = "import uvicorn\nfrom talk import uvicorn_cli\nuvicorn_cli.defer()\nprint(hasattr(uvicorn, 'run'))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                          check=True)
    assert done.stdout.strip() == "True"
