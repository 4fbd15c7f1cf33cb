"""memories_parkedtask: the poison tasks parked for an operator (memories/models/tasks.py).

A task that failed, timed out or killed its worker PARKING_ATTEMPTS times on the same input
is recorded here instead of being redelivered in a loop; the admin lists the rows and its
"retry" action sends the input again (memories/services/parking.py).
"""

import django.db.models.deletion
import django.utils.timezone
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("memories", "0015_memory_fillfactor"),
    ]

    operations = [
        migrations.CreateModel(
            name="ParkedTask",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("task", models.CharField(max_length=200)),
                ("input_kind", models.CharField(max_length=32)),
                ("input_ids", models.JSONField(blank=True, default=list)),
                ("input_key", models.CharField(max_length=255)),
                ("args", models.JSONField(blank=True, default=list)),
                ("kwargs", models.JSONField(blank=True, default=dict)),
                ("attempts", models.PositiveIntegerField(default=0)),
                (
                    "reason",
                    models.CharField(
                        choices=[
                            ("failed", "Failed"),
                            ("time limit", "Time Limit"),
                            ("worker lost", "Worker Lost"),
                        ],
                        max_length=16,
                    ),
                ),
                ("last_error", models.TextField(blank=True)),
                ("first_failed_at", models.DateTimeField(default=django.utils.timezone.now)),
                ("last_failed_at", models.DateTimeField(default=django.utils.timezone.now)),
                (
                    "status",
                    models.CharField(
                        choices=[("parked", "Parked"), ("retried", "Retried")],
                        default="parked",
                        max_length=16,
                    ),
                ),
                ("retried_at", models.DateTimeField(blank=True, null=True)),
                ("retried_by", models.CharField(blank=True, max_length=150)),
                (
                    "project",
                    models.ForeignKey(
                        blank=True,
                        null=True,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="parked_tasks",
                        to="memories.project",
                    ),
                ),
            ],
            options={
                "indexes": [
                    models.Index(fields=["status", "-last_failed_at"], name="parked_task_status"),
                    models.Index(fields=["project", "status"], name="parked_task_project"),
                ],
                "constraints": [
                    models.UniqueConstraint(fields=("task", "input_key"), name="parked_task_input")
                ],
            },
        ),
    ]
