import secrets
from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser

from memories.models import Membership, Project


class Command(BaseCommand):
    help = (
        "Create (or reset the password of) a console operator: a superuser (console and "
        "admin, every project), or with --project a member of that project in --role."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("username")
        parser.add_argument("--password", help="default: a random one, printed")
        parser.add_argument("--email", default="")
        parser.add_argument(
            "--project", help="make a member of this project (by name), not a superuser"
        )
        parser.add_argument(
            "--role",
            choices=Membership.Role.values,
            default=Membership.Role.VIEWER,
            help="with --project: viewer reads, editor changes (default: viewer)",
        )

    def handle(
        self,
        *args: Any,
        username: str,
        password: str | None,
        email: str,
        project: str | None,
        role: str,
        **options: Any,
    ) -> None:
        target = None
        if project is not None:
            target = Project.objects.filter(name=project).first()
            if target is None:
                raise CommandError(f"No project called {project!r}.")
        password = password or secrets.token_urlsafe(12)
        user, created = get_user_model().objects.get_or_create(
            username=username, defaults={"email": email}
        )
        if target is None:
            user.is_staff = user.is_superuser = True
        user.set_password(password)
        user.save()
        what = "superuser"
        if target is not None:
            Membership.objects.update_or_create(user=user, project=target, defaults={"role": role})
            what = f"{role} of {target.name!r}"
        self.stdout.write(
            f"{'Created' if created else 'Updated'} operator {username!r} ({what}) "
            f"with password {password}"
        )
