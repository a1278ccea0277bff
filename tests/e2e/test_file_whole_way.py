"""A 200 MB file the whole way, by the commands, through a kill of every process on it: the
sender mid-upload, the relay, then the receiving follower mid-download. It arrives once,
byte-identical, and neither end's memory grows with the file."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

from keys.filestream import chunk_count
from tests.conftest import befriend, make_agent
from tests.e2e.file_downloads import (
    RssSampler,
    downloads,
    killed_mid_download,
    sha256_of,
    traces_of,
)
from tests.e2e.file_transfers import (
    MB,
    Sampled,
    chunks_taken,
    file_next,
    fingerprint,
    killed_holding,
    metered_relay,
    write_random,
)

LIMIT_KB = 100 * 1024


def test_a_200_mb_file_through_a_killed_sender_relay_and_follower_arrives_once(tmp_path: Path) -> None:
    size = 200 * MB
    with metered_relay(tmp_path) as (relay, metrics):
        alice, bob = make_agent(tmp_path, relay, "alice", None), make_agent(tmp_path, relay, "bob", None)
        befriend(alice, bob)
        bob_fp, folder = fingerprint(bob), bob.home / "bob"
        src = tmp_path / "dataset.bin"
        sha = write_random(src, size, seed=290)

        first, transfer = killed_holding(alice, relay, bob_fp, 40, "the dataset", "--file", str(src),
                                         "--json")
        file_id = transfer.files[0].id
        relay.stop(signal.SIGKILL)
        relay.start()
        held = file_next(relay, bob_fp, file_id)
        again = Sampled(alice, "send", "bob", "the dataset", "--file", str(src), "--json")
        code, out, err = again.wait()
        assert code == 0, err
        assert json.loads(out)["id"] == transfer.id
        assert chunks_taken(metrics) == chunk_count(size) - held  # the upload resumed, not restarted

        sampler = RssSampler(folder)
        sampler.start()
        bob.ok("follow", "--peer", "alice")
        try:
            lines = killed_mid_download(bob, transfer.id, file_id)
        finally:
            bob.run("stop")
            sampler.done.set()
            sampler.join()

        (line,) = lines  # once
        assert line["id"] == transfer.id and line["text"] == "the dataset"
        (placed,) = downloads(bob)
        assert [f["path"] for f in line["files"]] == [str(placed)] and placed.name == "dataset.bin"
        assert line["files"][0]["size"] == size and sha256_of(placed) == sha  # byte-identical
        assert not traces_of(transfer.files[0].ref(), bob)  # the key is gone from bob's folder
        print(f"RSS peaks, KiB: sender {first.peak_kb} then {again.peak_kb}, follower {sampler.peak}")
        for peak in (first.peak_kb, again.peak_kb, sampler.peak):
            assert 0 < peak < LIMIT_KB, f"an RSS peak of {peak} KiB"
        assert sampler.samples > 0
        os.unlink(src)
