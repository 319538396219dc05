"""Boots stored before provenance was typed (issue 18, row 3): a read key of the wrong type
(`{"drift": "x"}`) moves under `unvalidated`, text no database stores gets U+FFFD, so every boot
passes `Provenance.parse` as new ones do. Pages read provenance leniently anyway
(`Provenance.read`); this makes the stored rows say what was wrong. Nothing to undo."""

from django.db import migrations


def repair(apps, schema_editor):
    from heliosweb.catalogs.provenance import Provenance

    Boot = apps.get_model("catalogs", "Boot")
    repaired = 0
    for boot in Boot.objects.only("id", "provenance").iterator():
        fixed = Provenance.repair(boot.provenance)
        if fixed is not None:
            Boot.objects.filter(pk=boot.pk).update(provenance=fixed)
            repaired += 1
    if repaired:
        print(f"\n  repaired the provenance of {repaired} stored boot(s) (invalid keys now under 'unvalidated')")


class Migration(migrations.Migration):
    dependencies = [("catalogs", "0002_boot_job_many")]

    operations = [migrations.RunPython(repair, migrations.RunPython.noop)]
