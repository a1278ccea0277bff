"""Names: the rule every name talk keeps follows, and which names could pass for one another.

Names become folder names and contact keys, and agents read them, so one rule holds for an
identity's, a contact's and a group's name (`check_name`). A name in one script cannot carry a
look-alike letter of another, and `confusable` finds a name already taken that looks the same.
"""

from __future__ import annotations

from durable.errors import UserError
from durable.printable import printable

__all__ = ["check_name"]

MAX_NAME = 64


def check_name(name: str) -> str:
    """Names become folder names and contact keys, and agents read them: keep them short,
    shell-safe, and in one script (a Latin name with a Cyrillic letter is a disguise)."""
    ok = 0 < len(name) <= MAX_NAME and all(c.isalnum() or c in "-_." for c in name)
    if not ok or name.startswith((".", "-")) or not one_script(name):
        raise UserError(
            f"invalid name {printable(name)!r}: use 1-{MAX_NAME} letters of one script, digits, "
            "'-', '_' or '.', not starting with '.' or '-'"
        )
    return name


# Letters of other scripts that look like Latin ones, folded to the Latin letter they mimic. Not
# the whole Unicode confusables table: the scripts whose lowercase letters pass for Latin.
_LOOKALIKES = str.maketrans(dict(zip(
    # Cyrillic, Greek, then dotless i and long s (escaped: they are the very look-alikes).
    "\u0430\u0432\u0441\u0435\u0451\u04bb\u0456\u0458\u043a\u04cf\u043c\u043d\u043e\u043f\u0440\u051b"
    "\u0455\u0442\u0443\u0445\u051d\u044c\u0475\u03b1\u03b2\u03b3\u03b5\u03b9\u03ba\u03bd\u03bf\u03c1"
    "\u03c4\u03c5\u03c7\u03c9\u03f2\u03f3" "01|\u0131\u017f",
    "abceehijklmhonpqstyxwbv" "abyeiknoptuxwcj" "ollis", strict=True)))


def _script(char: str) -> str:
    import unicodedata  # names only: `talk send` never loads the table

    if not char.isalpha():
        return ""
    word = unicodedata.name(char, "UNKNOWN").split(" ")[0]
    # Japanese mixes these three in one name; they are one writing system for this purpose.
    return "CJK" if word in ("HIRAGANA", "KATAKANA", "CJK") else word


def one_script(name: str) -> bool:
    """Whether every letter of `name` is of one script (digits and - _ . belong to all)."""
    return len({s for s in map(_script, name) if s}) <= 1


def skeleton(name: str) -> str:
    """What a name looks like: compatibility-folded, lower case, look-alike letters folded."""
    import unicodedata

    return unicodedata.normalize("NFKC", name).casefold().translate(_LOOKALIKES)


def confusable(name: str, others: set[str]) -> str | None:
    """The other name that `name` could be mistaken for, if any (the same name included)."""
    shape = skeleton(name)
    return next((o for o in sorted(others) if skeleton(o) == shape), None)
