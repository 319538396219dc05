"""`TelemetryBatch.launches` and `.requests` become `launch_count` and `request_count`: they count the
batch's records, while "launches" elsewhere means launch records or a request's graph sizes. A rename
of the columns: every stored count is kept."""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("telemetry", "0008_histograms_ten_percent_edges"),
    ]

    operations = [
        migrations.RenameField(model_name="telemetrybatch", old_name="launches", new_name="launch_count"),
        migrations.RenameField(model_name="telemetrybatch", old_name="requests", new_name="request_count"),
    ]
