"""The relay's file routes (`relay.file_store` keeps the chunks and says why it refuses one).

    PUT  /v1/files/{fp}/{tag}/{file}/{index}  anyone: one sealed chunk of a file for mailbox fp,
                                              under the sender's channel tag → 201 stored,
                                              200 already there (nothing changed)
    GET  /v1/files/{fp}/{file}                anyone: {"next": k, "bytes": n}, k the first chunk
                                              index not stored (where an upload resumes)
    POST /v1/files/{fp}/chunk                 owner: {"file", "index"} → the chunk's bytes
    POST /v1/files/{fp}/ack                   owner: {"files": [ids]} → delete them, {"deleted": n}

Errors beyond the relay's usual ones (`relay.errors`): 413 file_too_large (the file would pass
`max_file_bytes`), 507 file_quota (the mailbox's file quota of its kind, or this channel's share
of it, is full; retry later),
409 file_conflict (the file was begun under another tag), 404 no_such_chunk.
A chunk put spends a token of the client's chunk bucket (`rate_chunks`), not its deposit bucket:
one file is hundreds of chunks.
"""

from __future__ import annotations

from typing import Protocol

from starlette.requests import HTTPConnection, Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from keys.encoding import is_hex32
from keys.filestream import ABYTES, CHUNK_BYTES
from relay.clock import Clock
from relay.config import RelayConfig
from relay.errors import ApiError, bad_request, unknown_mailbox
from relay.file_store import ChunkOutcome, chunk_fits
from relay.limits import Limiter
from relay.metrics import Meter
from relay.request_parts import json_object, path_hex, read_body
from relay.store import Store

MOST_ACKED = 100  # files named in one acknowledgement
INDEX_DIGITS = 9  # no file has a billion chunks: longer indices are refused before int()


def _index(conn: HTTPConnection, most: int, past: ApiError | None = None) -> int:
    """The chunk index in the path, below `most`; a well-formed one at or past it raises `past`
    when given (a put: the file is over the limit, which no retry mends), else a bad request."""
    text = conn.path_params["index"]
    if not (text.isascii() and text.isdigit() and len(text) <= INDEX_DIGITS):
        raise bad_request(f"index must be a chunk number from 0 to {most - 1}")
    if int(text) >= most:
        raise past or bad_request(f"index must be a chunk number from 0 to {most - 1}")
    return int(text)


class Relay(Protocol):
    """What these routes use of `relay.app.Relay`: its store, settings and the checks every
    route shares."""

    store: Store
    config: RelayConfig
    clock: Clock
    metrics: Meter
    lookups: Limiter

    def admit(self, conn: HTTPConnection, limiter: Limiter, what: str) -> None: ...

    async def sign_key(self, fp: str) -> bytes | None: ...

    async def owner_request(self, request: Request, limit: int = ...) -> tuple[str, bytes]: ...


class FileRoutes:
    def __init__(self, relay: Relay) -> None:
        self.relay = relay
        self.chunks = Limiter(relay.config.rate_chunks)

    async def put_chunk(self, request: Request) -> Response:
        relay, quota = self.relay, self.relay.config.file_quota
        fp, tag, file_id = path_hex(request, "fp"), path_hex(request, "tag"), path_hex(request, "file")
        over = _refusal(ChunkOutcome.FILE_FULL, relay.config.max_file_bytes)
        index = _index(request, quota.most_chunks, over)
        relay.admit(request, self.chunks, "file chunks from this client")
        blob = await read_body(request, CHUNK_BYTES + ABYTES)
        if not chunk_fits(len(blob)):
            raise bad_request(f"a sealed chunk is {ABYTES} to {CHUNK_BYTES + ABYTES} bytes, not {len(blob)}")
        if await relay.sign_key(fp) is None:
            raise unknown_mailbox("the recipient has not published keys on this relay")
        outcome = await relay.store.files.put_chunk(fp, tag, file_id, index, blob, relay.clock(), quota)
        if outcome is ChunkOutcome.STORED:
            relay.metrics.deposit_bytes.inc(len(blob))
            return JSONResponse({"index": index}, status_code=201)
        if outcome is ChunkOutcome.KEPT:
            return JSONResponse({"index": index})
        raise _refusal(outcome, relay.config.max_file_bytes)

    async def file_next(self, request: Request) -> Response:
        fp, file_id = path_hex(request, "fp"), path_hex(request, "file")
        self.relay.admit(request, self.relay.lookups, "file lookups from this client")
        progress = await self.relay.store.files.progress(fp, file_id)
        return JSONResponse({"next": progress.next, "bytes": progress.bytes})

    async def get_chunk(self, request: Request) -> Response:
        fp, body = await self.relay.owner_request(request)
        data = json_object(body)
        file_id, index = data.get("file"), data.get("index")
        most = self.relay.config.file_quota.most_chunks
        if not is_hex32(file_id) or isinstance(index, bool) or not isinstance(index, int) \
                or not 0 <= index < most:
            raise bad_request(f"a chunk request needs 'file' (32 hex) and 'index' (0 to {most - 1})")
        blob = await self.relay.store.files.get_chunk(fp, str(file_id), index)
        if blob is None:
            raise ApiError(404, "no_such_chunk", "no such chunk: the file was acknowledged, expired, "
                           "or that part was never uploaded")
        return Response(blob, media_type="application/octet-stream")

    async def ack(self, request: Request) -> Response:
        fp, body = await self.relay.owner_request(request)
        ids = json_object(body).get("files")
        if not isinstance(ids, list) or not 0 < len(ids) <= MOST_ACKED or not all(map(is_hex32, ids)):
            raise bad_request(f"'files' must be a list of 1 to {MOST_ACKED} file ids (32 hex)")
        return JSONResponse({"deleted": await self.relay.store.files.ack(fp, [str(i) for i in ids])})


MIB = 1024 * 1024


def _refusal(outcome: ChunkOutcome, max_file_bytes: int) -> ApiError:
    if outcome is ChunkOutcome.FILE_FULL:
        most = (f"{max_file_bytes // MIB} MiB" if max_file_bytes % MIB == 0 else f"{max_file_bytes:,} bytes")
        return ApiError(413, "file_too_large", f"this relay takes files of at most {most}; "
                        "send a smaller one")
    if outcome is ChunkOutcome.WRONG_TAG:
        return ApiError(409, "file_conflict", "this file was begun under another channel; "
                        "upload it again under a new file id")
    if outcome is ChunkOutcome.TAG_FULL:
        return ApiError(507, "file_quota", "this channel holds its share of the recipient's file room "
                        "while they are away; retry later, once the recipient has taken some")
    if outcome is ChunkOutcome.UNKNOWN_FULL:
        return ApiError(507, "file_quota", "the recipient's mailbox holds its most files on channels "
                        "it has not read yet; retry later (the recipient's next fetch opens this channel)")
    return ApiError(507, "file_quota", "the recipient's mailbox holds its most files; retry later, "
                    "once the recipient has taken some")


def file_routes(relay: Relay) -> list[BaseRoute]:
    files = FileRoutes(relay)
    return [
        Route("/v1/files/{fp}/chunk", files.get_chunk, methods=["POST"]),
        Route("/v1/files/{fp}/ack", files.ack, methods=["POST"]),
        Route("/v1/files/{fp}/{file}", files.file_next, methods=["GET"]),
        Route("/v1/files/{fp}/{tag}/{file}/{index}", files.put_chunk, methods=["PUT"]),
    ]
