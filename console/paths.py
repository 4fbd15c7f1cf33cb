"""The console's URL prefixes, shared by console/urls.py and the view modules that
keep their own ``urlpatterns`` (a project's pages live under PROJECT, a user's under
USER)."""

PROJECT = "dashboard/p/<int:project_id>/"
USER = f"{PROJECT}users/<int:user_id>/"
