"""A database-level guard: UPDATE of an audit row is refused by the database itself, not only by
the ORM. DELETE is guarded in the ORM only: a row trigger on DELETE would also stop
`manage.py flush` and the test runner's table resets; removing a row still breaks the hash chain."""

from django.db import migrations

SQLITE_CREATE = """
CREATE TRIGGER decisions_auditevent_no_update
BEFORE UPDATE ON decisions_auditevent
BEGIN
    SELECT RAISE(ABORT, 'audit events are append-only: they cannot be updated');
END;
"""
SQLITE_DROP = "DROP TRIGGER IF EXISTS decisions_auditevent_no_update;"

POSTGRES_CREATE = """
CREATE OR REPLACE FUNCTION decisions_auditevent_no_update() RETURNS trigger AS $$
BEGIN
    RAISE EXCEPTION 'audit events are append-only: they cannot be updated';
END;
$$ LANGUAGE plpgsql;
CREATE TRIGGER decisions_auditevent_no_update
BEFORE UPDATE ON decisions_auditevent
FOR EACH ROW EXECUTE FUNCTION decisions_auditevent_no_update();
"""
POSTGRES_DROP = """
DROP TRIGGER IF EXISTS decisions_auditevent_no_update ON decisions_auditevent;
DROP FUNCTION IF EXISTS decisions_auditevent_no_update();
"""


def _run(schema_editor, sqlite: str, postgres: str) -> None:
    sql = {"sqlite": sqlite, "postgresql": postgres}.get(schema_editor.connection.vendor)
    if sql:  # other databases keep the ORM-level guard only
        with schema_editor.connection.cursor() as cursor:
            cursor.execute(sql)


def create(apps, schema_editor) -> None:
    _run(schema_editor, SQLITE_CREATE, POSTGRES_CREATE)


def drop(apps, schema_editor) -> None:
    _run(schema_editor, SQLITE_DROP, POSTGRES_DROP)


class Migration(migrations.Migration):
    dependencies = [("decisions", "0001_initial")]

    operations = [migrations.RunPython(create, drop)]
