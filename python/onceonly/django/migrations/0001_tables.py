"""onceonly's tables, by the stores' own migration files (no Django models:
nothing in the project's models can migrate them away). Irreversible: going
back would drop every operation record, and with them the promise."""
from django.db import migrations


def create_tables(apps, schema_editor):
    from onceonly.django import conf, schema

    schema.migrate(schema_editor.connection, conf.options()["SCHEMA"])


class Migration(migrations.Migration):
    initial = True
    dependencies = []
    operations = [migrations.RunPython(create_tables, reverse_code=None, elidable=False)]
