"""The console's forms: they validate what an operator typed; services change things."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib.admin.forms import AdminAuthenticationForm
from django.contrib.auth.forms import AuthenticationForm
from django.core.exceptions import ValidationError

from console.services.logins import (
    login_failure_record,
    login_success_record,
    login_wait_seconds,
)
from console.services.overview import USER_SORT_DEFAULT, USER_SORTS
from memories.config import settings_schema


class ThrottledLoginMixin:
    """Refuses to even check a password once the username or the client IP has too
    many recent failures (console.services.logins); counts each failure.
    ``throttled_seconds`` says how long to wait (the view answers 429)."""

    throttled_seconds = 0
    request: Any
    data: Any
    cleaned_data: dict[str, Any]

    def clean(self) -> dict[str, Any]:
        username = str(self.cleaned_data.get("username") or self.data.get("username") or "")
        ip = self.request.META.get("REMOTE_ADDR", "") if self.request else ""
        wait = login_wait_seconds(username=username, ip=ip)
        if wait:
            self.throttled_seconds = wait
            minutes = (wait + 59) // 60
            raise ValidationError(
                f"Too many failed logins. Wait {minutes} minute{'s' if minutes > 1 else ''} "
                "before trying again.",
                code="throttled",
            )
        try:
            cleaned: dict[str, Any] = super().clean()  # type: ignore[misc]
        except ValidationError:
            login_failure_record(username=username, ip=ip)
            raise
        if username:
            login_success_record(username=username)
        return cleaned


class ConsoleLoginForm(ThrottledLoginMixin, AuthenticationForm):
    pass


class AdminLoginForm(ThrottledLoginMixin, AdminAuthenticationForm):
    pass


class ApiKeyCreateForm(forms.Form):
    name = forms.CharField(
        max_length=200,
        required=False,
        help_text="What uses it, e.g. 'support bot (staging)'.",
    )
    read_only = forms.BooleanField(
        required=False, label="Read only", help_text="Can search and read, cannot write."
    )


def _setting_field(name: str, entry: dict[str, Any]) -> forms.Field:
    """The form field of one setting of the schema (memories/config/)."""
    common: dict[str, Any] = {
        "label": name,  # as in the API and the docs
        "help_text": entry["description"],
    }
    bounds: dict[str, Any] = {"min_value": entry.get("minimum"), "max_value": entry.get("maximum")}
    if entry.get("choices"):
        return forms.ChoiceField(choices=[(c, c) for c in entry["choices"]], **common)
    if entry["type"] == "boolean":
        return forms.BooleanField(required=False, **common)
    if entry["type"] == "integer":
        return forms.IntegerField(**bounds, **common)
    if entry["type"] == "number":
        return forms.FloatField(**bounds, widget=forms.NumberInput(attrs={"step": "any"}), **common)
    return forms.CharField(**common)


class SettingsSectionForm(forms.Form):
    """One section of the project's configuration, its fields generated from the
    schema; ``initial`` is the effective values, so ``changes()`` is exactly what the
    operator changed (a setting left alone keeps its override or its default)."""

    def __init__(self, *args: Any, section: str, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.section = section
        self.schema = settings_schema()[section]
        self.overrides: set[str] = set()  # the settings the project sets (a badge)
        for name, entry in self.schema.items():
            self.fields[name] = _setting_field(name, entry)

    def changes(self) -> dict[str, dict[str, Any]]:
        """``{section: {name: value}}`` of the changed fields (for the service)."""
        return {self.section: {name: self.cleaned_data[name] for name in self.changed_data}}

    def errors_add(self, errors: dict[str, list[str]]) -> None:
        """The service's SettingsError (``{"search.rrf_k": [...]}``) shown in place."""
        for dotted, messages in errors.items():
            name = dotted.removeprefix(f"{self.section}.")
            for message in messages:
                self.add_error(name if name in self.fields else None, message)


class UserSearchForm(forms.Form):
    q = forms.CharField(max_length=200, required=False, label="Search users")
    sort = forms.ChoiceField(choices=[(s, s) for s in USER_SORTS], required=False)
    page = forms.IntegerField(min_value=1, required=False)

    def params(self) -> dict[str, Any]:
        """Valid search parameters; anything invalid falls back to its default."""
        data = self.cleaned_data if self.is_valid() else {}
        return {
            "query": (data.get("q") or "").strip(),
            "sort": data.get("sort") or USER_SORT_DEFAULT,
            "page": data.get("page") or 1,
        }
