"""Stored data can never break a page (issue 18, row 3): boots stored before their provenance was
typed, with every wrong type a reader could trip on, are written straight to the database; every
page and API that lists boots still answers 200, and the data migration repairs them so that they
pass the check new uploads pass. Recipes whose names differ only in case are flagged."""

from __future__ import annotations

import importlib

import pytest
from django.apps import apps
from django.core.management import call_command
from django.test import Client

from heliosweb.catalogs.models import Boot
from heliosweb.catalogs.provenance import Provenance
from heliosweb.recipes.models import Recipe

GRAPHS = [{"prefill": 64, "decode": 0, "ms": 1.0}, {"prefill": 128, "decode": 0, "ms": 1.8}]
BAD_PROVENANCE = [
    {"drift": "x"},  # the row of the issue: 201 at upload, then 500 on three pages for everyone
    {"drift": 1},
    {"drift": {"capacities": "x", "load": "heavy"}},
    {"drift": {"capacities": [None, "64"]}},
    {"drift": []},
    {"device": 5, "mode": ["cpu"]},
    {"device": {"name": "gpu"}, "mode": 3.5},
    {"host_load": {"before": {"load_average": "high", "cores": 2}}, "repeats": "many"},
    ["not", "an", "object"],
    "text",
]


@pytest.fixture
def bad_boots(recipe):
    return [Boot.objects.create(recipe=recipe, catalog=GRAPHS, provenance=p) for p in BAD_PROVENANCE]


@pytest.mark.django_db
def test_pages_that_list_boots_answer_200_whatever_provenance_was_stored(maintainer, bad_boots):
    client = Client()
    client.force_login(maintainer)
    for path in ("/jobs/new", "/explain", "/recipes/tiny-cpu", "/", "/api/recipes/tiny-cpu/boots/"):
        response = client.get(path)
        assert response.status_code == 200, (path, response.content[:500])
    for boot in bad_boots:
        assert client.get("/recipes/tiny-cpu", {"boot": boot.pk}).status_code == 200
        assert client.get("/explain", {"catalog": "boot", "boot_id": boot.pk, "prompt_tokens": 300}).status_code == 200
    page = client.get("/jobs/new").content.decode()
    assert f"#{bad_boots[0].pk} · tiny-cpu · uploaded" in page  # a device of the wrong type reads as absent


@pytest.mark.django_db
def test_readers_see_only_what_was_validated():
    assert Provenance.read({"drift": "x", "device": 5, "mode": "eager"}) == Provenance(mode="eager")
    typed = Provenance.read({"drift": {"capacities": [2048, 4096], "load": 2}, "device": "H100"})
    assert typed.device == "H100" and typed.drift is not None and typed.drift.label == "drifted 2048, 4096"
    load = {
        "before": {"load_average": [7.9, 6.5, 4.0], "cores": 2},
        "after": {"load_average": [8.1, 6.6, 4.1], "cores": 2},
    }
    measured = Provenance.read({"host_load": load, "repeats": 5})
    assert (measured.host_load.label, measured.repeats) == ("load 7.90 on 2 cores", 5)


@pytest.mark.django_db
def test_the_data_migration_repairs_every_stored_boot_so_it_passes_the_upload_check(bad_boots, recipe):
    good = Boot.objects.create(recipe=recipe, catalog=GRAPHS, provenance={"device": "cpu", "drift": None})
    migration = importlib.import_module("heliosweb.catalogs.migrations.0003_bounds_repair_provenance")
    migration.repair(apps, None)
    for boot in Boot.objects.exclude(pk=good.pk):
        Provenance.parse(boot.provenance)  # raises if still out of bounds
    assert Boot.objects.get(pk=bad_boots[0].pk).provenance == {"unvalidated": {"drift": "x"}}
    assert Boot.objects.get(pk=bad_boots[5].pk).provenance == {"unvalidated": {"device": 5, "mode": ["cpu"]}}
    assert Boot.objects.get(pk=good.pk).provenance == {"device": "cpu", "drift": None}  # untouched


def test_repair_replaces_text_no_database_stores():
    assert Provenance.repair({"device": "a\x00b", "notes": ["x\udfff"]}) == {"device": "a\ufffdb", "notes": ["x\ufffd"]}
    assert Provenance.repair({"device": "cpu"}) is None


@pytest.mark.django_db
def test_recipes_whose_names_differ_only_in_case_are_flagged(recipe, capsys):
    Recipe.objects.create(name="TINY-CPU")  # stored around the service, before names were compared so
    from heliosweb.recipes.checks import confusable_recipe_names

    warnings = confusable_recipe_names()
    assert [w.id for w in warnings] == ["recipes.W001"] and "TINY-CPU, tiny-cpu" in warnings[0].msg
    call_command("check", databases=["default"])
    assert "recipes.W001" in capsys.readouterr().err
