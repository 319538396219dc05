"""What is stored of a bearer token: never the token itself, so a copy of the database (a backup,
a leaked dump) lets nobody in. Tokens are 160 or more random bits, so an unsalted SHA-256 is as
strong as the token, and a lookup by it is one indexed query."""

from __future__ import annotations

import hashlib


def token_digest(token: str) -> str:
    """SHA-256 of a token, hex: what `EngineToken.key_hash` holds."""
    return hashlib.sha256(token.encode()).hexdigest()


def user_token_key(token: str) -> str:
    """What DRF's `Token.key` (40 characters) holds of a user's API token: the first 160 bits of its digest."""
    return token_digest(token)[:40]
