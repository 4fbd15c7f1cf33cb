#!/usr/bin/env python
import os
import sys

# Django's commands that never open a database connection: the others get the
# embedded PostgreSQL started (or attached to) first, unless DATABASE_URL is set.
WITHOUT_DATABASE = {
    "help", "version", "--help", "-h", "--version", "check", "diffsettings",
    "collectstatic", "findstatic", "spectacular", "startapp", "startproject",
    "makemessages", "compilemessages",
}  # fmt: skip


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "memoryhub.settings")
    import django
    from django.core.management import execute_from_command_line

    command = sys.argv[1] if len(sys.argv) > 1 else "help"
    if command not in WITHOUT_DATABASE:
        django.setup()
        from memoryhub import embedded

        embedded.services_start()
    execute_from_command_line(sys.argv)


if __name__ == "__main__":
    main()
