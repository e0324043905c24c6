"""The bench's streamed replies: tokens that join back into the text, and the token that
completes the first clause or sentence, by hand-counted cases."""

from __future__ import annotations

import pytest

from streamtts.bench.llm_replies import REPLIES, completing_token
from streamtts.bench.token_stream import stream_tokens


@pytest.mark.parametrize("reply", REPLIES, ids=lambda r: f"{r.lang}-{r.text[:8]}")
def test_tokens_join_back_into_the_reply(reply) -> None:  # type: ignore[no-untyped-def]
    tokens = stream_tokens(reply.text)
    assert "".join(tokens) == reply.text
    assert all(token.strip() for token in tokens)


def test_a_latin_clause_is_complete_when_the_next_word_shows_its_space() -> None:
    tokens = ["Thanks", " for", " holding,", " I", " have"]
    assert completing_token(tokens, sentence=False) == 3  # " I" confirms "holding,"
    # "Sure," costs 5: under the minimum, so the first clause is the sentence.
    tokens = stream_tokens("Sure, I can help with that. Your refund")
    assert (
        "".join(tokens[: completing_token(tokens, sentence=False) + 1]) == "Sure, I can help with that. Your"
    )
    # "3.5" is no boundary: no space follows its mark.
    tokens = stream_tokens("The rate is now 3.5 percent, fixed")
    assert (
        "".join(tokens[: completing_token(tokens, sentence=False) + 1])
        == "The rate is now 3.5 percent, fixed"
    )


def test_a_cjk_mark_completes_its_clause_as_it_arrives() -> None:
    tokens = stream_tokens("您好，我已经查到订单，仓库")
    # "您好，" costs 5; "您好，我已经查到订单，" 21: its last token completes it.
    assert "".join(tokens[: completing_token(tokens, sentence=False) + 1]) == "您好，我已经查到订单，"
    assert completing_token(stream_tokens("您好。谢谢"), sentence=True, min_cost=1) == 1  # "。"
