from django.db import migrations, models


class Migration(migrations.Migration):
    initial = True
    dependencies = []
    operations = [
        migrations.CreateModel(
            name="Effect",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("job", models.CharField(max_length=200)),
                ("op_key", models.CharField(max_length=200)),
                ("pid", models.IntegerField(null=True)),
            ],
            options={"db_table": "onceonly_replay_effects"},
        ),
        migrations.CreateModel(
            name="NaiveMark",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("job", models.CharField(max_length=200)),
                ("op_key", models.CharField(max_length=200)),
            ],
            options={"db_table": "onceonly_replay_naive"},
        ),
    ]
