"""Collected static files: content-hashed names (cached for good), gzip/brotli variants.

Django's manifest storage writes hashed URLs only when DEBUG is off; `./dev up` runs with DEBUG on
and serves what it collected, so its pages would name the unhashed files, which WhiteNoise then
serves with a short cache. Here every URL is the hashed one, whatever DEBUG says.
"""

from __future__ import annotations

from whitenoise.storage import CompressedManifestStaticFilesStorage


class CollectedStaticStorage(CompressedManifestStaticFilesStorage):
    def url(self, name: str | None, force: bool = True) -> str:
        return super().url(name, force=force)
