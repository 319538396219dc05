"""The import layers in pyproject.toml name every room: an app left out is checked by no contract."""

import tomllib
from pathlib import Path

from django.conf import settings

ROOT = Path(__file__).resolve().parents[2]


def _web_layers() -> list[str]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    (contract,) = [c for c in config["tool"]["importlinter"]["contracts"] if c["name"].startswith("web rooms")]
    return contract["layers"]


def _named() -> set[str]:
    return {name.strip() for layer in _web_layers() for name in layer.split("|")}


def test_no_layer_is_optional():
    # "(heliosweb.x)" makes a layer optional: import-linter then skips it silently when it is missing
    assert [layer for layer in _web_layers() if "(" in layer] == []


def test_every_installed_heliosweb_app_is_in_a_layer():
    apps = {app for app in settings.INSTALLED_APPS if app.startswith("heliosweb.")}
    assert apps, "no heliosweb app installed"
    assert sorted(apps - _named()) == []


def test_every_heliosweb_package_and_module_is_in_a_layer():
    # settings, celery and stack are process wiring read by name (DJANGO_SETTINGS_MODULE,
    # celery -A, devtool), not rooms; every other module or package under heliosweb/ is one.
    wiring = {"heliosweb.settings", "heliosweb.celery", "heliosweb.stack"}
    found = {
        f"heliosweb.{path.stem if path.is_file() else path.name}"
        for path in (ROOT / "heliosweb").iterdir()
        if (path.is_dir() and (path / "__init__.py").exists()) or (path.suffix == ".py" and path.stem != "__init__")
    }
    assert sorted(found - _named() - wiring) == []
