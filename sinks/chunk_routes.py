"""Which result topics a request's audio chunks go to (pure)."""

from __future__ import annotations

from schemas import Delivery
from streamtts.topics import TopicNames


def chunk_topics(delivery: Delivery, topics: TopicNames) -> list[str]:
    """The default audio topic (if the request wants chunks) and its reply topic, deduplicated."""
    out = [topics.audio] if delivery.chunks else []
    if delivery.reply_topic and delivery.reply_topic not in out:
        out.append(delivery.reply_topic)
    return out
