"""The four role groups (heliosweb/dashboard/roles.py), with the permissions created first so a
fresh database gets them in this migration."""

from django.contrib.auth.management import create_permissions
from django.db import migrations

from heliosweb.dashboard.roles import roles_ensure


def create_roles(apps, schema_editor) -> None:
    for app_config in apps.get_app_configs():
        app_config.models_module = True
        create_permissions(app_config, apps=apps, verbosity=0)
        app_config.models_module = None
    roles_ensure(apps.get_model("auth", "Group"), apps.get_model("auth", "Permission"))


class Migration(migrations.Migration):
    dependencies = [
        ("auth", "0012_alter_user_first_name_max_length"),
        ("contenttypes", "0002_remove_content_type_name"),
        ("jobs", "0001_initial"),
        ("recipes", "0002_recipes_in_the_product"),
        ("decisions", "0003_one_audit_chain_and_comments"),
    ]

    operations = [migrations.RunPython(create_roles, migrations.RunPython.noop)]
