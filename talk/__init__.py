"""The `talk` command: wiring between the user and the library packages.

Nothing above imports it, so its face (`__all__`, see `durable.faces`) is empty: the console
script enters at `talk.__main__:main`, and the modules here import one another freely.
"""

from __future__ import annotations

from durable.faces import face

__all__ = ()
__getattr__ = face(__name__, __all__)
