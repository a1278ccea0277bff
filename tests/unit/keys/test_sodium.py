"""keys.sodium against PyNaCl's own wrappers: what either seals or signs, the other opens or
verifies, byte for byte where the operation is deterministic; wrong lengths and altered bytes
raise the errors PyNaCl raises."""

from __future__ import annotations

import subprocess
import sys

import pytest
from hypothesis import given
from hypothesis import strategies as st
from nacl import bindings, public, secret, signing
from nacl.exceptions import BadSignatureError, CryptoError

from keys import sodium

key32 = st.binary(min_size=32, max_size=32)
nonce24 = st.binary(min_size=24, max_size=24)
message = st.binary(max_size=300)


@given(key32, message)
def test_a_sealed_box_opens_in_either_library(raw: bytes, plain: bytes) -> None:
    ours, theirs = sodium.PrivateKey(raw), public.PrivateKey(raw)
    assert bytes(ours.public_key) == bytes(theirs.public_key)
    assert public.SealedBox(theirs).decrypt(sodium.SealedBox(ours.public_key).encrypt(plain)) == plain
    assert sodium.SealedBox(ours).decrypt(public.SealedBox(theirs.public_key).encrypt(plain)) == plain


@given(key32, key32, nonce24, message)
def test_a_box_is_the_same_bytes_in_either_library(a: bytes, b: bytes, nonce: bytes, plain: bytes) -> None:
    ours = sodium.Box(sodium.PrivateKey(a), sodium.PrivateKey(b).public_key)
    theirs = public.Box(public.PrivateKey(a), public.PrivateKey(b).public_key)
    assert ours.shared_key() == theirs.shared_key()
    sealed = ours.encrypt(plain, nonce)
    assert sealed == bytes(theirs.encrypt(plain, nonce))
    back = public.Box(public.PrivateKey(b), public.PrivateKey(a).public_key)
    assert back.decrypt(ours.encrypt(plain)) == plain
    assert sodium.Box(sodium.PrivateKey(b), sodium.PrivateKey(a).public_key).decrypt(sealed) == plain
    assert ours.decrypt(sealed[24:], nonce) == plain


@given(key32, nonce24, message)
def test_a_secret_box_is_the_same_bytes_in_either_library(key: bytes, nonce: bytes, plain: bytes) -> None:
    ours, theirs = sodium.SecretBox(key), secret.SecretBox(key)
    sealed = ours.encrypt(plain, nonce)
    assert sealed == bytes(theirs.encrypt(plain, nonce))
    assert sealed[24:] == sodium.crypto_secretbox_easy(plain, nonce, key)
    assert theirs.decrypt(ours.encrypt(plain)) == plain
    assert ours.decrypt(bytes(theirs.encrypt(plain))) == plain


@given(key32, message)
def test_a_signature_is_the_same_bytes_in_either_library(seed: bytes, plain: bytes) -> None:
    ours, theirs = sodium.SigningKey(seed), signing.SigningKey(seed)
    assert bytes(ours.verify_key) == bytes(theirs.verify_key)
    signed = ours.sign(plain)
    assert bytes(signed) == bytes(theirs.sign(plain)) and signed.signature == theirs.sign(plain).signature
    assert signed.message == plain
    assert theirs.verify_key.verify(plain, signed.signature) == plain
    assert ours.verify_key.verify(plain, theirs.sign(plain).signature) == plain
    assert ours.verify_key.verify(bytes(signed)) == plain


@given(key32, key32)
def test_scalarmult_agrees_with_pynacl(n: bytes, other: bytes) -> None:
    p = bytes(sodium.PrivateKey(other).public_key)
    assert sodium.crypto_scalarmult(n, p) == bindings.crypto_scalarmult(n, p)


@given(key32, st.lists(st.binary(max_size=2000), min_size=1, max_size=4))
def test_a_secret_stream_opens_in_either_library(key: bytes, chunks: list[bytes]) -> None:
    tags = [sodium.SecretStream.TAG_MESSAGE] * (len(chunks) - 1) + [sodium.SecretStream.TAG_FINAL]
    ours = sodium.SecretStream()
    header = ours.init_push(key)
    theirs = bindings.crypto_secretstream_xchacha20poly1305_state()
    bindings.crypto_secretstream_xchacha20poly1305_init_pull(theirs, header, key)
    for plain, tag in zip(chunks, tags, strict=True):
        sealed = ours.push(plain, tag)
        assert bindings.crypto_secretstream_xchacha20poly1305_pull(theirs, sealed) == (plain, tag)
    theirs = bindings.crypto_secretstream_xchacha20poly1305_state()
    header = bindings.crypto_secretstream_xchacha20poly1305_init_push(theirs, key)
    reader = sodium.SecretStream()
    reader.init_pull(header, key)
    for plain, tag in zip(chunks, tags, strict=True):
        sealed = bindings.crypto_secretstream_xchacha20poly1305_push(theirs, plain, None, tag)
        reader = sodium.SecretStream(bytes(reader))  # a restored state goes on where it stopped
        assert reader.pull(sealed) == (plain, tag)


@given(key32, nonce24, st.binary(min_size=1, max_size=100), st.data())
def test_any_changed_byte_of_a_box_fails_to_open(key: bytes, nonce: bytes, plain: bytes,
                                                   data: st.DataObject) -> None:
    secret_box = sodium.SecretBox(key)
    box = sodium.Box(sodium.PrivateKey(key), sodium.PrivateKey(nonce + nonce[:8]).public_key)
    sealed_box = sodium.SealedBox(sodium.PrivateKey(key))
    for opener, blob in ((secret_box, secret_box.encrypt(plain, nonce)), (box, box.encrypt(plain, nonce)),
                         (sealed_box, sealed_box.encrypt(plain))):
        at = data.draw(st.integers(0, len(blob) - 1))
        flip = data.draw(st.integers(1, 255))
        changed = blob[:at] + bytes([blob[at] ^ flip]) + blob[at + 1:]
        with pytest.raises(CryptoError):
            opener.decrypt(changed)
        with pytest.raises(CryptoError):
            opener.decrypt(blob[:data.draw(st.integers(0, len(blob) - 1))])


@given(key32, message, st.data())
def test_any_changed_byte_of_a_signature_is_refused(seed: bytes, plain: bytes, data: st.DataObject) -> None:
    key = sodium.SigningKey(seed)
    signature = key.sign(plain).signature
    at, flip = data.draw(st.integers(0, 63)), data.draw(st.integers(1, 255))
    with pytest.raises(BadSignatureError):
        key.verify_key.verify(plain, signature[:at] + bytes([signature[at] ^ flip]) + signature[at + 1:])
    with pytest.raises(BadSignatureError):
        key.verify_key.verify(plain + b"!", signature)


def test_every_byte_of_a_signature_is_checked() -> None:
    key = sodium.SigningKey(b"\x07" * 32)
    signature = key.sign(b"hello").signature
    for at in range(len(signature)):
        with pytest.raises(BadSignatureError):
            key.verify_key.verify(b"hello", signature[:at] + bytes([signature[at] ^ 1]) + signature[at + 1:])


@pytest.mark.parametrize("size", [0, 31, 33])
def test_a_wrong_length_never_reaches_libsodium(size: int) -> None:
    wrong, good = b"\x01" * size, b"\x01" * 32
    for make in (sodium.PublicKey, sodium.PrivateKey, sodium.SecretBox, sodium.SigningKey, sodium.VerifyKey):
        with pytest.raises(CryptoError) as caught:
            make(wrong)
        assert isinstance(caught.value, ValueError | TypeError)  # as PyNaCl's own are both
    with pytest.raises(ValueError):
        sodium.crypto_scalarmult(wrong, good)
    with pytest.raises(ValueError):
        sodium.crypto_scalarmult(good, wrong)
    with pytest.raises(ValueError):
        sodium.SecretBox(good).encrypt(b"x", b"\x00" * 23)
    with pytest.raises(ValueError):
        sodium.crypto_secretbox_easy(b"x", b"\x00" * 24, wrong)
    with pytest.raises(ValueError):
        sodium.SigningKey(good).verify_key.verify(b"x", b"\x00" * 63)
    with pytest.raises(ValueError):
        sodium.SecretStream().init_push(wrong)
    with pytest.raises(ValueError):
        sodium.SecretStream().init_pull(b"\x00" * 23, good)
    with pytest.raises(ValueError):
        sodium.SecretStream(b"\x00" * 10)
    with pytest.raises(TypeError):
        sodium.PublicKey("\x01" * 32)  # type: ignore[arg-type]


def test_short_ciphertexts_raise_crypto_error() -> None:
    key = b"\x02" * 32
    for short in (b"", b"\x00" * 23, b"\x00" * 39):
        with pytest.raises(CryptoError):
            sodium.SecretBox(key).decrypt(short)
    with pytest.raises(CryptoError):
        sodium.SealedBox(sodium.PrivateKey(key)).decrypt(b"\x00" * 47)
    stream = sodium.SecretStream()
    stream.init_pull(b"\x00" * sodium.SecretStream.HEADER_BYTES, key)
    with pytest.raises(CryptoError):
        stream.pull(b"\x00" * (sodium.SecretStream.ABYTES - 1))
    with pytest.raises(CryptoError):
        stream.pull(b"\x00" * sodium.SecretStream.ABYTES)


def test_a_low_order_public_key_agrees_on_nothing() -> None:
    with pytest.raises(CryptoError):
        sodium.Box(sodium.PrivateKey(b"\x01" * 32), sodium.PublicKey(b"\x00" * 32))
    with pytest.raises(RuntimeError):
        sodium.crypto_scalarmult(b"\x01" * 32, b"\x00" * 32)


def test_agreed_keys_are_kept_for_the_pairs_used_last_and_always_agree_with_pynacl() -> None:
    most = sodium._agreed.cache_parameters()["maxsize"]
    sodium._agreed.cache_clear()
    pairs = [(n.to_bytes(2, "big") * 16, (n + 1000).to_bytes(2, "big") * 16) for n in range(most + 20)]
    for second_pass in (False, True):  # the second pass finds the first pairs evicted: agreed on anew
        for n, (a, b) in enumerate(pairs):
            ours = sodium.Box(sodium.PrivateKey(a), sodium.PrivateKey(b).public_key)
            hits = sodium._agreed.cache_info().hits
            again = sodium.Box(sodium.PrivateKey(a), sodium.PrivateKey(b).public_key)  # from the cache
            assert sodium._agreed.cache_info().hits == hits + 1
            expected = public.Box(public.PrivateKey(a), public.PrivateKey(b).public_key).shared_key()
            assert ours.shared_key() == again.shared_key() == expected
            kept = sodium._agreed.cache_info().currsize
            assert kept == (most if second_pass else min(most, n + 1))  # never more than the most
    sodium._agreed.cache_clear()
    for _ in range(2):  # a key of low order is refused each time, never kept
        with pytest.raises(CryptoError):
            sodium.Box(sodium.PrivateKey(b"\x01" * 32), sodium.PublicKey(b"\x00" * 32))
    assert sodium._agreed.cache_info().currsize == 0


def test_a_sealed_box_of_a_public_key_cannot_open() -> None:
    with pytest.raises(TypeError):
        sodium.SealedBox(sodium.PrivateKey.generate().public_key).decrypt(b"\x00" * 64)


def test_pynacl_keys_still_work_where_talk_takes_keys() -> None:
    theirs = public.PrivateKey.generate()
    ours = sodium.PrivateKey(bytes(theirs))
    box = sodium.Box(theirs, ours.public_key)  # type: ignore[arg-type]
    assert box.shared_key() == sodium.Box(ours, ours.public_key).shared_key()
    assert sodium.SealedBox(ours).decrypt(sodium.SealedBox(theirs.public_key).encrypt(b"x")) == b"x"  # type: ignore[arg-type]
    assert sodium.SealedBox(theirs).decrypt(sodium.SealedBox(ours.public_key).encrypt(b"x")) == b"x"  # type: ignore[arg-type]


def test_keys_compare_by_value() -> None:
    three, four = b"\x03" * 32, b"\x04" * 32
    assert sodium.PrivateKey(three) == sodium.PrivateKey(three) != sodium.PrivateKey(four)
    assert sodium.SigningKey(three) == sodium.SigningKey(three) != sodium.SigningKey(four)
    assert len({sodium.PublicKey(b"\x09" * 32), sodium.PublicKey(b"\x09" * 32)}) == 1


def test_loading_it_leaves_pynacl_wrappers_unloaded() -> None:
    code = "import sys, keys.sodium; print(sorted(m for m in sys.modules if m.startswith('nacl')))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "['nacl', 'nacl._sodium', 'nacl.exceptions']"
