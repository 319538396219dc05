"""Users' API tokens were stored in clear in DRF's `Token.key`; from now on only `user_token_key`
of a token is (as engine tokens keep only their hash). This rewrites every existing key to its
hash, so the clients holding those tokens keep working (the token they send is hashed and found).
It cannot be undone: the tokens are not kept anywhere (backwards, keys stay hashed)."""

from django.db import migrations

from heliosweb.common.tokens import user_token_key


def hash_existing_keys(apps, schema_editor):
    Token = apps.get_model("authtoken", "Token")
    rows = list(Token.objects.values_list("key", "user_id", "created"))
    Token.objects.all().delete()  # the key is the primary key: each row is written again
    for key, user_id, created in rows:
        hashed = user_token_key(key)
        Token.objects.create(key=hashed, user_id=user_id)
        Token.objects.filter(key=hashed).update(created=created)  # auto_now_add set it to now


class Migration(migrations.Migration):
    dependencies = [
        ("telemetry", "0006_engines_bounds_repair"),
        ("authtoken", "0004_alter_tokenproxy_options"),
    ]

    operations = [migrations.RunPython(hash_existing_keys, migrations.RunPython.noop, elidable=False)]
