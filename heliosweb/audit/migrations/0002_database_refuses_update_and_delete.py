"""The database itself refuses UPDATE and DELETE of audit rows (see heliosweb/audit/guard.py for
how `flush` and the test runner still empty the table)."""

from django.db import migrations

TABLE = "audit_auditevent"
MESSAGE = "audit events are append-only: they cannot be"

SQLITE_CREATE = [
    f"""CREATE TRIGGER audit_event_no_update BEFORE UPDATE ON {TABLE}
    BEGIN SELECT RAISE(ABORT, '{MESSAGE} updated'); END;""",
    f"""CREATE TRIGGER audit_event_no_delete BEFORE DELETE ON {TABLE}
    WHEN NOT helios_audit_flushing()
    BEGIN SELECT RAISE(ABORT, '{MESSAGE} deleted'); END;""",
]
SQLITE_DROP = ["DROP TRIGGER IF EXISTS audit_event_no_update;", "DROP TRIGGER IF EXISTS audit_event_no_delete;"]

# Row triggers: TRUNCATE (what flush runs on PostgreSQL) does not fire them.
POSTGRES_CREATE = [
    f"""CREATE OR REPLACE FUNCTION audit_event_append_only() RETURNS trigger AS $$
    BEGIN RAISE EXCEPTION '{MESSAGE} %', lower(TG_OP) || 'd'; END;
    $$ LANGUAGE plpgsql;""",
    f"""CREATE TRIGGER audit_event_append_only BEFORE UPDATE OR DELETE ON {TABLE}
    FOR EACH ROW EXECUTE FUNCTION audit_event_append_only();""",
]
POSTGRES_DROP = [
    f"DROP TRIGGER IF EXISTS audit_event_append_only ON {TABLE};",
    "DROP FUNCTION IF EXISTS audit_event_append_only();",
]


def _run(schema_editor, sqlite: list[str], postgres: list[str]) -> None:
    statements = {"sqlite": sqlite, "postgresql": postgres}.get(schema_editor.connection.vendor, [])
    with schema_editor.connection.cursor() as cursor:  # other databases keep the ORM-level guard only
        for sql in statements:
            cursor.execute(sql)


def create(apps, schema_editor) -> None:
    _run(schema_editor, SQLITE_CREATE, POSTGRES_CREATE)


def drop(apps, schema_editor) -> None:
    _run(schema_editor, SQLITE_DROP, POSTGRES_DROP)


class Migration(migrations.Migration):
    dependencies = [("audit", "0001_initial")]

    operations = [migrations.RunPython(create, drop)]
