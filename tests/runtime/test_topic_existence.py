"""Reply topics and release lanes are checked per request: the answer is remembered, found and
missing alike, and the memo stays bounded whatever names requests carry."""

from __future__ import annotations

from streamtts.runtime.topic_existence import TopicExistence


class _Cluster:
    def __init__(self, topics: set[str]) -> None:
        self.topics = topics
        self.lookups: list[str] = []

    async def lookup(self, name: str) -> bool:
        self.lookups.append(name)
        return name in self.topics


class _Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


async def test_a_missing_topic_is_looked_up_once_per_ttl_not_once_per_request() -> None:
    cluster, clock = _Cluster({"tts.reply.a"}), _Clock()
    memo = TopicExistence(cluster.lookup, found_ttl_s=60, missing_ttl_s=10, clock=clock)
    for _ in range(100):
        assert not await memo.exists("tts.reply.missing")
        assert await memo.exists("tts.reply.a")
    assert cluster.lookups == ["tts.reply.missing", "tts.reply.a"]
    # An operator creates the topic: noticed once the short missing TTL has passed.
    cluster.topics.add("tts.reply.missing")
    clock.now += 10.5
    assert await memo.exists("tts.reply.missing")
    assert await memo.exists("tts.reply.a")  # still within its 60 s
    assert cluster.lookups == ["tts.reply.missing", "tts.reply.a", "tts.reply.missing"]
    # A deleted topic is noticed after the found TTL.
    cluster.topics.discard("tts.reply.a")
    clock.now += 60
    assert not await memo.exists("tts.reply.a")


async def test_the_memo_is_bounded_and_drops_the_least_recently_checked() -> None:
    cluster = _Cluster(set())
    memo = TopicExistence(cluster.lookup, max_entries=50, clock=_Clock())
    for i in range(5000):
        await memo.exists(f"tts.reply.client-{i}")
    assert len(memo) == 50
    await memo.exists("tts.reply.client-4999")  # the newest is still remembered
    assert cluster.lookups.count("tts.reply.client-4999") == 1
    await memo.exists("tts.reply.client-0")  # the oldest was dropped: looked up again
    assert cluster.lookups.count("tts.reply.client-0") == 2
