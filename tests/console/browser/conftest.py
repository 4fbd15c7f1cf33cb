"""Browser tests: the operators' console in headless Chromium, driven by Playwright.

The browser is Debian's ``chromium`` package, never a Playwright download: the
``chromium_path`` fixture finds it, installs it with apt-get when it is missing and
this process may (root, apt-get present), and otherwise skips every browser test
saying why. The console is served by pytest-django's ``live_server`` (a thread of
this process, on the test session's embedded PostgreSQL and Redis), so these tests
use a transactional database: what a fixture writes is committed and visible to the
server, and every table is emptied after each test.

Fixtures: ``browser`` (session), ``page`` (a fresh laptop-sized page per test),
``editor`` / ``viewer`` (operators with a membership in the ``owner`` project),
``second_project`` (another project none of them belongs to), ``editor_page`` /
``viewer_page`` (a page already logged in), ``login`` (``login(page, operator)``) and
the plain function ``screenshot(page, name)`` (PNGs under var/screenshots/).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from django.contrib.auth import get_user_model
from django.test import Client

from memories.models import Membership
from tests.conftest import Tenant

# Playwright's sync API runs an asyncio event loop in this thread; Django refuses ORM
# calls from a thread with a running loop unless told the calls are synchronous (the
# fixtures' and assertions' queries are).
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
os.environ.setdefault("PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD", "1")

CHROMIUM_CANDIDATES = ("/usr/bin/chromium", "/usr/bin/chromium-browser")
SCREENSHOTS = Path(settings.BASE_DIR) / "var" / "screenshots"
PASSWORD = "correct horse battery staple"
LAPTOP = {"width": 1280, "height": 800}
PHONE = {"width": 390, "height": 844}


def _chromium_find() -> str | None:
    found = [path for path in CHROMIUM_CANDIDATES if os.access(path, os.X_OK)]
    return found[0] if found else None


def _chromium_install() -> str:
    """Install Debian's chromium; '' when done, else why it could not be."""
    if os.geteuid() != 0:
        return "not root, so apt-get cannot install it"
    apt = shutil.which("apt-get")
    if apt is None:
        return "no apt-get on this machine"
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    install = [apt, "install", "-y", "--no-install-recommends", "chromium"]
    if subprocess.run(install, env=env, capture_output=True).returncode == 0:
        return ""
    # an image without package lists finds nothing to install: read them, then retry
    subprocess.run([apt, "update"], env=env, capture_output=True)
    result = subprocess.run(install, env=env, capture_output=True, text=True)
    return "" if result.returncode == 0 else f"apt-get install chromium failed: {result.stderr}"


@pytest.fixture(scope="session")
def chromium_path() -> str:
    """The Chromium executable for the browser tests (installed with apt when it can be)."""
    path = _chromium_find()
    if path is None:
        reason = _chromium_install()
        path = _chromium_find()
        if path is None:
            pytest.skip(
                f"browser tests need Debian's chromium at {CHROMIUM_CANDIDATES[0]}: "
                f"{reason or 'installed, but not found there'}"
            )
    return path


@pytest.fixture(scope="package")
def browser(chromium_path: str) -> Iterator[Any]:
    """One headless Chromium for the browser tests. Playwright's sync API keeps an
    event loop running on the main thread while it is open: it is closed when the
    browser tests are done, so that later tests may run their own (asyncio.run)."""
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.skip("browser tests need Playwright for Python (pip install -e '.[dev]')")
    with sync_playwright() as playwright:
        # root has no user namespace sandbox in a container; /dev/shm is small there
        chromium = playwright.chromium.launch(
            executable_path=chromium_path,
            headless=True,
            args=["--no-sandbox", "--disable-dev-shm-usage"],
        )
        yield chromium
        chromium.close()


@pytest.fixture(autouse=True)
def fast_password_hashing(settings: Any) -> None:
    """The operators' passwords are hashed once each; the real hasher takes ~0.3 s."""
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture
def page(browser: Any, live_server: Any) -> Iterator[Any]:
    """A fresh page (its own cookies) at a laptop's size; not logged in."""
    context = browser.new_context(viewport=LAPTOP, base_url=live_server.url)
    context.set_default_timeout(10_000)
    new_page = context.new_page()
    yield new_page
    context.close()


@dataclass
class Operator:
    """A console login with a membership: ``username`` / ``password``."""

    user: Any
    username: str
    password: str
    project: Any


def operator_create(*, username: str, project: Any, role: str | None) -> Operator:
    """A console user; with ``role``, a member of ``project`` in that role."""
    user = get_user_model().objects.create_user(username=username, password=PASSWORD)
    if role is not None:
        Membership.objects.create(user=user, project=project, role=role)
    return Operator(user=user, username=username, password=PASSWORD, project=project)


@pytest.fixture
def editor(owner: Tenant) -> Operator:
    """An operator who may change the ``owner`` project."""
    return operator_create(username="erin", project=owner.project, role=Membership.Role.EDITOR)


@pytest.fixture
def viewer(owner: Tenant) -> Operator:
    """An operator who may only read the ``owner`` project."""
    return operator_create(username="victor", project=owner.project, role=Membership.Role.VIEWER)


@pytest.fixture
def second_project(outsider: Tenant) -> Tenant:
    """Another project, with its own keys; neither operator is a member."""
    return outsider


@pytest.fixture
def login(live_server: Any) -> Callable[[Any, Operator], Any]:
    """``login(page, operator)``: log the operator in through a session cookie (fast;
    the login form has its own test); returns the page, still where it was."""

    def log_in(page: Any, operator: Operator) -> Any:
        client = Client()
        client.force_login(operator.user)
        cookie = client.cookies[settings.SESSION_COOKIE_NAME]
        page.context.add_cookies(
            [{"name": settings.SESSION_COOKIE_NAME, "value": cookie.value, "url": live_server.url}]
        )
        return page

    return log_in


@pytest.fixture
def editor_page(page: Any, editor: Operator, login: Callable[[Any, Operator], Any]) -> Any:
    """A page logged in as the editor."""
    return login(page, editor)


@pytest.fixture
def viewer_page(page: Any, viewer: Operator, login: Callable[[Any, Operator], Any]) -> Any:
    """A page logged in as the viewer."""
    return login(page, viewer)


def screenshot(page: Any, name: str, *, full_page: bool = True) -> Path:
    """Save the page as var/screenshots/<name>.png (look at them: they are for people)."""
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    path = SCREENSHOTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=full_page)
    return path
