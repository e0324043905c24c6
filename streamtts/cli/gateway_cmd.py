"""`streamtts gateway`: the HTTP/WebSocket edge (REST, OpenAI-compatible, WebSocket, web page)."""

from __future__ import annotations

import argparse

HELP = "serve the HTTP/WebSocket gateway over the pipeline's topics"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--host", help="bind address (default: $STREAMTTS_GATEWAY_HOST or 127.0.0.1)")
    p.add_argument("--port", type=int, help="port (default: $STREAMTTS_GATEWAY_PORT or 8080)")
    p.add_argument("--tls-cert", metavar="PEM", help="serve HTTPS/WSS with this certificate (chain)")
    p.add_argument("--tls-key", metavar="PEM", help="the certificate's private key")
    p.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    import asyncio
    import dataclasses

    from streamtts.gateway.settings import GatewaySettings

    settings = GatewaySettings.from_env()
    pairs = (
        ("host", args.host),
        ("port", args.port),
        ("tls_certfile", args.tls_cert),
        ("tls_keyfile", args.tls_key),
    )
    settings = dataclasses.replace(settings, **{k: v for k, v in pairs if v is not None})
    _check_tls(settings)
    if not settings.api_keys:
        from streamtts.errors import ConfigError

        raise ConfigError(
            "no API keys: set STREAMTTS_GATEWAY_API_KEYS=key:tenant or STREAMTTS_GATEWAY_API_KEYS_FILE"
        )
    return asyncio.run(_serve(settings))


async def _serve(settings: object) -> int:
    import uvicorn

    from streamtts.gateway.app import create_app
    from streamtts.gateway.server import uvicorn_options
    from streamtts.gateway.settings import GatewaySettings
    from streamtts.runtime.settings import Settings

    assert isinstance(settings, GatewaySettings)
    import os

    from streamtts.runtime import jsonlog

    # A service logs JSON lines; log_config=None keeps uvicorn from installing its own text
    # handlers, so its access and error logs go through ours too.
    jsonlog.configure(os.environ.get("STREAMTTS_LOG_LEVEL", "INFO"), quiet_clients=False)
    app = create_app(settings, Settings.from_env())
    config = uvicorn.Config(
        app,
        host=settings.host,
        port=settings.port,
        lifespan="on",
        log_config=None,
        **uvicorn_options(settings),
    )
    scheme = "https" if settings.tls_certfile else "http"
    print(f"streamtts gateway on {scheme}://{settings.host}:{settings.port}/", flush=True)
    await uvicorn.Server(config).serve()
    return 0


def _check_tls(settings: object) -> None:
    """A missing or unreadable certificate/key fails here with one line, not inside uvicorn."""
    import ssl

    from streamtts.errors import ConfigError
    from streamtts.gateway.settings import GatewaySettings

    assert isinstance(settings, GatewaySettings)
    if settings.tls_certfile is None or settings.tls_keyfile is None:
        return
    try:
        ssl.create_default_context(ssl.Purpose.CLIENT_AUTH).load_cert_chain(
            settings.tls_certfile, settings.tls_keyfile
        )
    except (OSError, ssl.SSLError) as err:
        raise ConfigError(
            f"--tls-cert/--tls-key: cannot load {settings.tls_certfile} / {settings.tls_keyfile}: "
            f"{getattr(err, 'strerror', None) or err}"
        ) from None
