"""The web page in headless Chromium: it loads, streams a sentence over the WebSocket, plays it."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

pytestmark = [pytest.mark.integration, pytest.mark.model]

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--autoplay-policy=no-user-gesture-required",
]


async def test_page_streams_speech_in_chromium(
    live_gateway_url: str, results_dir: Path, record_property: pytest.RecordProperty
) -> None:
    from playwright.async_api import async_playwright

    # Not skipped when missing: scripts/bootstrap.sh installs it for the test extras.
    assert Path(CHROMIUM).exists(), "needs Debian's Chromium: apt-get install chromium"

    shot = results_dir / "page.png"
    async with async_playwright() as pw:
        browser = await pw.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        try:
            page = await browser.new_page(viewport={"width": 1000, "height": 900})
            errors: list[str] = []
            page.on("pageerror", lambda e: errors.append(str(e)))
            await page.goto(f"{live_gateway_url}/?key=key-acme")
            await page.wait_for_selector("#voice option[value=en_joe]", state="attached")
            await page.select_option("#voice", "en_joe")
            # The language list comes from GET /v1/voices: every table row, with its tier.
            await page.wait_for_selector("#language option[value=pl]", state="attached")
            assert "formant" in (await page.text_content("#language option[value=pl]") or "")
            await page.select_option("#language", "en")
            await page.select_option("#format", "pcm")
            await page.fill("#text", "Hello from the browser. This sentence streams over a WebSocket.")
            await page.click("#speak")
            await page.wait_for_selector("#status[data-state=completed]", timeout=60_000)
            duration_ms = float(await page.get_attribute("#duration", "data-ms") or 0)
            ttfa_ms = float(await page.get_attribute("#ttfa", "data-ms") or -1)
            chunks = int(await page.text_content("#chunks") or 0)
            # The pipeline-health table summarises the worker's own /metrics.
            await page.wait_for_function(
                "document.querySelector('#health').textContent.includes('\"completed\":')"
                " && document.querySelector('#health').dataset.ready === 'true'",
                timeout=15_000,
            )
            health = await page.text_content("#health") or ""
            # Every format of the codec registry is offered; G.711 the page decodes itself.
            offered = await page.eval_on_selector_all("#format option", "os => os.map(o => o.value)")
            await page.select_option("#format", "mulaw")
            await page.fill("#text", "Telephone audio plays in the browser too.")
            await page.click("#speak")
            await page.wait_for_selector("#status[data-state=completed]", timeout=60_000)
            mulaw_ms = float(await page.get_attribute("#duration", "data-ms") or 0)
            mulaw_captions = await page.text_content("#captions")
            await page.screenshot(path=str(shot), full_page=True)
        finally:
            await browser.close()
    record_property("screenshot", str(shot))
    print(f"screenshot: {shot}")
    assert not errors, errors
    assert 2000 < duration_ms < 10_000, duration_ms  # two short sentences of decoded audio
    assert sorted(offered) == sorted(["pcm", "wav", "mp3", "opus", "flac", "mulaw", "alaw"]), offered
    assert 1000 < mulaw_ms < 6000, mulaw_ms  # one sentence of 8 kHz G.711, decoded by the page
    # Its two chunks' words read as written (a chunk boundary used to drop the space).
    assert mulaw_captions == "Telephone audio plays in the browser too.", mulaw_captions
    assert 0 < ttfa_ms < 30_000 and chunks >= 2
    assert '"completed":' in health and "/metrics" in health
    assert shot.stat().st_size > 10_000


WORDS = [
    "Captions",
    "follow",
    "the",
    "voice.",
    "Each",
    "word",
    "lights",
    "up",
    "while",
    "it",
    "is",
    "spoken.",
]


async def test_page_highlights_each_word_while_it_plays(live_gateway_url: str, results_dir: Path) -> None:
    """The `words` events drive the highlight: each word is marked while the audio clock is
    inside its interval, in reading order, and the captions show the request's text."""
    from playwright.async_api import async_playwright

    assert Path(CHROMIUM).exists(), "needs Debian's Chromium: apt-get install chromium"
    shot = results_dir / "page-captions.png"
    async with async_playwright() as pw:
        browser = await pw.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        try:
            page = await browser.new_page(viewport={"width": 1000, "height": 700})
            errors: list[str] = []
            page.on("pageerror", lambda e: errors.append(str(e)))
            await page.goto(f"{live_gateway_url}/?key=key-acme")
            await page.wait_for_selector("#voice option[value=en_joe]", state="attached")
            await page.select_option("#voice", "en_joe")
            # The language list comes from GET /v1/voices: every table row, with its tier.
            await page.wait_for_selector("#language option[value=pl]", state="attached")
            assert "formant" in (await page.text_content("#language option[value=pl]") or "")
            await page.select_option("#language", "en")
            await page.select_option("#format", "pcm")
            assert await page.is_checked("#timestamps")
            await page.fill("#text", " ".join(WORDS))
            await page.click("#speak")
            # A word is highlighted while the audio plays: capture it.
            await page.wait_for_selector("#captions span.word.speaking", timeout=60_000)
            await page.screenshot(path=str(shot))
            await page.wait_for_selector("#status[data-state=completed]", timeout=60_000)
            # Playback ends after the stream does: wait on the audio clock, not a sleep.
            await page.wait_for_function(
                "(() => { const c = window.streamttsCaptions; const last = c.items[c.items.length - 1];"
                " return last && document.querySelector('#captions span.word.speaking') === null"
                " && c.highlights.length > 0 && c.highlights[c.highlights.length - 1].index === c.items.length - 1; })()",
                timeout=30_000,
            )
            shown = await page.eval_on_selector_all(
                "#captions span.word", "els => els.map(e => e.textContent)"
            )
            caption_text = (await page.text_content("#captions") or "").strip()
            marks = await page.evaluate("window.streamttsCaptions.highlights")
        finally:
            await browser.close()
    assert not errors, errors
    assert [w.strip(".") for w in WORDS] == shown
    assert caption_text == " ".join(WORDS)  # punctuation and spaces as written
    indices = [m["index"] for m in marks]
    assert indices == sorted(indices), indices  # in reading order, never backwards
    assert len(set(indices)) >= len(WORDS) - 1, indices  # (a frame may skip one short word)
    for m in marks:  # each highlight happened inside its word's interval on the audio clock
        assert m["start"] - 0.001 <= m["at"] <= max(m["end"], m["start"] + 0.03) + 0.001, m
    assert shot.stat().st_size > 5_000


async def test_page_speaks_an_ssml_document_with_the_toggle(live_gateway_url: str) -> None:
    """The SSML toggle sends the text as one document: it is spoken (no markup read out) and
    the captions show its words, not its tags."""
    from playwright.async_api import async_playwright

    ssml = '<speak>Hello <break time="300ms"/> <sub alias="World Wide Web">WWW</sub> friends.</speak>'
    async with async_playwright() as pw:
        browser = await pw.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        try:
            page = await browser.new_page()
            errors: list[str] = []
            page.on("pageerror", lambda e: errors.append(str(e)))
            await page.goto(f"{live_gateway_url}/?key=key-acme")
            await page.wait_for_selector("#voice option[value=jm_kumo]", state="attached")
            await page.select_option("#voice", "jm_kumo")
            await page.select_option("#format", "pcm")
            await page.check("#ssml")
            await page.fill("#text", ssml)
            await page.click("#speak")
            await page.wait_for_selector("#status[data-state=completed]", timeout=60_000)
            shown = await page.eval_on_selector_all(
                "#captions span.word", "els => els.map(e => e.textContent)"
            )
            audio_ms = float(await page.get_attribute("#duration", "data-ms") or 0)
        finally:
            await browser.close()
    assert not errors, errors
    assert shown == ["Hello", "WWW", "friends"], shown
    assert audio_ms > 1000
