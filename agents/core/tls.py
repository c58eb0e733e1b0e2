"""The TLS context of the bot's HTTP clients, in a module of its own: the start-up checks need it before (and, when a
key is refused, without) the Anthropic SDK, whose import alone costs about a second of CPU."""

from __future__ import annotations

import functools
import ssl

import httpx2


@functools.cache
def client_tls() -> ssl.SSLContext:
    """The TLS context the SDK's HTTP client would make itself (httpx2's defaults: certifi, or SSL_CERT_FILE /
    SSL_CERT_DIR), made once per process: loading the CA bundle costs ~40 ms of CPU per client, and one SSLContext
    serves any number of clients."""
    return httpx2.create_ssl_context()
