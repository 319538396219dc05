"""Stored catalogs: one `Boot` is one capture of every graph shape of a recipe (or a demo one)."""

from __future__ import annotations

from django.db import models
from django.utils.functional import cached_property

from .provenance import Provenance


class Boot(models.Model):
    recipe = models.ForeignKey("recipes.Recipe", on_delete=models.CASCADE, related_name="boots")
    # A capture job with `boots > 1` stores one Boot per repeated boot.
    job = models.ForeignKey("jobs.BenchmarkJob", null=True, blank=True, on_delete=models.SET_NULL, related_name="boots")
    catalog = models.JSONField(help_text="list of {prefill, decode, ms, ...}")
    provenance = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        get_latest_by = "created_at"

    def __str__(self) -> str:
        return f"boot {self.pk} of {self.recipe_id} ({len(self.catalog)} shapes)"

    @cached_property
    def info(self) -> Provenance:
        """The provenance keys pages read, typed (a stored value of the wrong type reads as absent)."""
        return Provenance.read(self.provenance)

    @property
    def drifted(self) -> str:
        """ "drifted 2048, 4096" for a boot captured with deliberate drift (its catalog over-measures
        those graphs), else "": how every page and picker marks it."""
        return self.info.drift.label if self.info.drift else ""
