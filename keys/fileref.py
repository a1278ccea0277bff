"""A file a message announces: its relay id, name, size, hash and the key that opens its chunks.

A chat message carries files in its inner envelope as "files" (1 to `MAX_FILES` refs, the text
may be empty), and a text too long for one envelope as "body" (one ref without a name; the text
then lives in the file and the envelope's "text" is ""). The key rides inside the ratchet, so a
file has the forward secrecy of the message that announces it.

Every field comes from a peer: `FileRef.from_json` is the one gate for them (`keys.gate` admits
"files" and "body" only through `files_of` and `body_of`), and refuses a field out of its shape
with `keys.gate.Invalid` naming it. The name is kept as sent (printable, bounded) and is never a
path here: where a file lands is `follower.files.names`'s to decide.
"""

from __future__ import annotations

import base64
import binascii
import re
from typing import Any, NamedTuple

from keys.filestream import CHUNK_BYTES, HEADER_BYTES, KEY_BYTES
from keys.invalid import Invalid

__all__ = ["CHUNK_BYTES", "MAX_BODY", "MAX_FILES", "MAX_NAME", "MAX_SIZE", "FileRef", "body_of", "files_of"]

MAX_FILES = 16
MAX_NAME = 255
MAX_SIZE = 2**40
# A message's text at most, in its body or not (UTF-8 bytes): it is read whole into the
# recipient agent's inbox; anything longer is a file.
MAX_BODY = 1024 * 1024
HEX32 = re.compile(r"[0-9a-f]{32}")
HEX64 = re.compile(r"[0-9a-f]{64}")
B64 = re.compile(r"[A-Za-z0-9+/]+={0,2}")


class FileRef(NamedTuple):
    id: str  # the relay's id of the file: 32 lowercase hex, random
    name: str | None  # peer-chosen, untrusted; None for a message's body
    size: int  # plaintext bytes
    sha256: str  # of the plaintext, 64 lowercase hex
    key: bytes  # secretstream key, 32 bytes
    header: bytes  # secretstream header, 24 bytes
    chunk: int = CHUNK_BYTES  # plaintext bytes per chunk, the only size this version sends or takes

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, **({"name": self.name} if self.name is not None else {}),
                "size": self.size, "sha256": self.sha256,
                "key": base64.b64encode(self.key).decode(), "header": base64.b64encode(self.header).decode(),
                "chunk": self.chunk}

    @classmethod
    def from_json(cls, obj: object, named: bool = True, what: str = "files") -> FileRef:
        """The ref `obj` describes; `named`: a file's ref (a name required), else a body's (none).

        Raises:
            Invalid: a field is missing or out of its shape; the reason names it.
        """
        if not isinstance(obj, dict):
            raise Invalid(f"{what}: an entry is not an object")
        file_id = obj.get("id")
        if not isinstance(file_id, str) or HEX32.fullmatch(file_id) is None:
            raise Invalid(f"{what}: id is not 32 lowercase hex characters")
        size = obj.get("size")
        if type(size) is not int or not 0 <= size <= MAX_SIZE:
            raise Invalid(f"{what}: size is not an integer from 0 to 2**40")
        digest = obj.get("sha256")
        if not isinstance(digest, str) or HEX64.fullmatch(digest) is None:
            raise Invalid(f"{what}: sha256 is not 64 lowercase hex characters")
        if obj.get("chunk") != CHUNK_BYTES or type(obj.get("chunk")) is not int:
            raise Invalid(f"{what}: chunk is not {CHUNK_BYTES}")
        key = _bytes(obj.get("key"), KEY_BYTES, what, "key")
        header = _bytes(obj.get("header"), HEADER_BYTES, what, "header")
        return cls(file_id, _name(obj, named, what), size, digest, key, header, CHUNK_BYTES)


def _name(obj: dict[Any, Any], named: bool, what: str) -> str | None:
    if not named:
        if "name" in obj:
            raise Invalid(f"{what}: a body carries no name")
        return None
    name = obj.get("name")
    # Any text: what it may not hold on this machine, `follower.files.names` takes out.
    if not isinstance(name, str) or not 0 < len(name) <= MAX_NAME:
        raise Invalid(f"{what}: name is not text of 1 to {MAX_NAME} characters")
    return name


def _bytes(value: object, size: int, what: str, field: str) -> bytes:
    if not isinstance(value, str) or len(value) > 2 * size or B64.fullmatch(value) is None:
        raise Invalid(f"{what}: {field} is not base64 of {size} bytes")
    try:
        raw = base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise Invalid(f"{what}: {field} is not base64 of {size} bytes") from exc
    if len(raw) != size:
        raise Invalid(f"{what}: {field} is not base64 of {size} bytes")
    return raw


def check_files(value: object) -> list[dict[str, Any]]:
    """The "files" field as the gate passes it on: 1 to `MAX_FILES` refs, distinct ids, in JSON."""
    if not isinstance(value, list) or not 0 < len(value) <= MAX_FILES:
        raise Invalid(f"files is not a list of 1 to {MAX_FILES} entries")
    refs = [FileRef.from_json(v) for v in value]
    if len({r.id for r in refs}) != len(refs):
        raise Invalid("files: two entries share an id")
    return [r.to_json() for r in refs]


def check_body(value: object) -> dict[str, Any]:
    """The "body" field as the gate passes it on: a text of at most `MAX_BODY` bytes."""
    ref = FileRef.from_json(value, named=False, what="body")
    if ref.size > MAX_BODY:
        raise Invalid(f"body: size is over the {MAX_BODY:,} bytes a message's text may have; a longer one "
                      "goes as a file")
    return ref.to_json()


def files_of(extra: dict[str, Any]) -> list[FileRef]:
    """The files an admitted message announces (none: an empty list).

    Raises:
        Invalid: the field is out of its shape.
    """
    if "files" not in extra:
        return []
    return [FileRef.from_json(v) for v in check_files(extra["files"])]


def body_of(extra: dict[str, Any]) -> FileRef | None:
    """The file an admitted message's long text lives in, or None.

    Raises:
        Invalid: the field is out of its shape.
    """
    if "body" not in extra:
        return None
    return FileRef.from_json(extra["body"], named=False, what="body")
