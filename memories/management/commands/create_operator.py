import secrets
from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandParser


class Command(BaseCommand):
    help = "Create (or reset the password of) a dashboard and admin operator."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("username")
        parser.add_argument("--password", help="default: a random one, printed")
        parser.add_argument("--email", default="")

    def handle(
        self, *args: Any, username: str, password: str | None, email: str, **options: Any
    ) -> None:
        password = password or secrets.token_urlsafe(12)
        user, created = get_user_model().objects.get_or_create(
            username=username, defaults={"email": email}
        )
        user.is_staff = user.is_superuser = True
        user.set_password(password)
        user.save()
        self.stdout.write(
            f"{'Created' if created else 'Updated'} operator {username!r} with password {password}"
        )
