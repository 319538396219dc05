from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("recipes", "0002_recipes_in_the_product"),
    ]

    operations = [
        migrations.AddField(
            model_name="recipe",
            name="hardware",
            field=models.CharField(blank=True, db_default="", max_length=64),
        ),
    ]
