"""Collected static files: content-hashed names (cached for good), gzip/brotli variants. Django's
manifest storage writes hashed URLs only with DEBUG off, and `./dev up` runs with it on (its pages
named unhashed files, served with a short cache): here every URL is the hashed one.
"""

from __future__ import annotations

from whitenoise.storage import CompressedManifestStaticFilesStorage


class CollectedStaticStorage(CompressedManifestStaticFilesStorage):
    def url(self, name: str | None, force: bool = True) -> str:
        return super().url(name, force=force)
