"""Each batch becomes a numbered live frame of its recipe; batches stored before are numbered in
arrival order and get an empty frame (the live page shows them as gaps in drawing, not in numbers)."""

from django.db import migrations, models


def number_existing(apps, schema_editor):
    TelemetryBatch = apps.get_model("telemetry", "TelemetryBatch")
    counters: dict[int, int] = {}
    for batch in TelemetryBatch.objects.order_by("id"):
        counters[batch.recipe_id] = counters.get(batch.recipe_id, 0) + 1
        batch.seq = counters[batch.recipe_id]
        batch.frame = {"seq": batch.seq, "engine": batch.engine}
        batch.save(update_fields=["seq", "frame"])


class Migration(migrations.Migration):
    dependencies = [("telemetry", "0001_initial")]

    operations = [
        migrations.RemoveIndex(model_name="telemetrybatch", name="telemetry_t_recipe__016600_idx"),
        migrations.AddField(
            model_name="telemetrybatch",
            name="seq",
            field=models.PositiveBigIntegerField(null=True),
        ),
        migrations.AddField(
            model_name="telemetrybatch",
            name="frame",
            field=models.JSONField(default=dict, help_text="what the live page draws of this batch (telemetry.frames)"),
            preserve_default=False,
        ),
        migrations.RunPython(number_existing, migrations.RunPython.noop),
        migrations.AlterField(
            model_name="telemetrybatch",
            name="seq",
            field=models.PositiveBigIntegerField(
                help_text="the recipe's live frame number: 1, 2, 3, ... with no gaps"
            ),
        ),
        migrations.AddConstraint(
            model_name="telemetrybatch",
            constraint=models.UniqueConstraint(fields=("recipe", "seq"), name="one_frame_per_recipe_number"),
        ),
    ]
