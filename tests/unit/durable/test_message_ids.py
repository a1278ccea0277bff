"""durable.message_ids: a typed id or prefix names one message, or the error says what to do."""

from __future__ import annotations

import pytest

from durable.errors import NotFound, UserError
from durable.message_ids import MIN_PREFIX, SHORT, resolve, short

ONE = "abcdef01" + "0" * 24
TWO = "abcdef02" + "1" * 24
OTHER = "1234567890ab" + "2" * 20
IDS = [ONE, TWO, OTHER]


def pick(typed: str) -> str:
    return resolve(typed, IDS, "sent message", "`talk outbox` lists them")


def test_a_whole_id_a_short_id_or_any_unambiguous_prefix_names_its_message() -> None:
    assert pick(ONE) == ONE
    assert pick(short(OTHER)) == OTHER and len(short(OTHER)) == SHORT
    assert pick(TWO[:MIN_PREFIX + 2]) == TWO
    assert pick(OTHER[:MIN_PREFIX]) == OTHER
    assert pick(" ABCDEF01 ") == ONE  # copied with blanks, or typed in capitals


def test_a_prefix_of_several_asks_for_more_characters() -> None:
    with pytest.raises(UserError, match="ambiguous: abcdef matches 2 messages; give more characters") as err:
        pick("abcdef")
    assert not isinstance(err.value, NotFound)
    assert short(ONE) in err.value.message and short(TWO) in err.value.message


def test_an_unknown_id_names_the_command_that_lists_them() -> None:
    with pytest.raises(NotFound, match=r"no sent message ffffff; `talk outbox` lists them"):
        pick("ffffff")
    with pytest.raises(NotFound):
        resolve(ONE, [], "held message", "`talk held` lists them")


@pytest.mark.parametrize("typed", ["", "abcde", "abcdeg", "abc def0", "0" * 33, "../../etc",
                                   "\x1b[2Jabcdef", "abcdef01" + "\u202e"])
def test_what_is_no_id_is_refused_before_any_lookup(typed: str) -> None:
    with pytest.raises(UserError, match="is not a message id: give 6 to 32 hex characters") as err:
        pick(typed)
    assert "\x1b" not in err.value.message and "\u202e" not in err.value.message  # echoed as repr


def test_a_very_long_hostile_id_is_echoed_cut_short() -> None:
    with pytest.raises(UserError) as err:
        pick("z" * 10_000)
    assert len(err.value.message) < 200
