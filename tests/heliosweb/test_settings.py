import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_production_settings_pass_the_deploy_checks_with_no_warnings(tmp_path):
    env = dict(
        os.environ,
        HELIOS_ENV="production",
        HELIOS_SECRET_KEY="x" * 20 + "-prod-test-key-with-enough-entropy-AbC123!",
        HELIOS_AUDIT_KEY="audit-key-for-this-test-only",
        HELIOS_ALLOWED_HOSTS="helios.example.org",
        HELIOS_VAR_DIR=str(tmp_path),
    )
    result = subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "no issues" in result.stdout


def test_production_refuses_to_start_without_a_secret_key(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "HELIOS_SECRET_KEY"}
    env.update(HELIOS_ENV="production", HELIOS_VAR_DIR=str(tmp_path), HELIOS_AUDIT_KEY="k")
    result = subprocess.run([sys.executable, "manage.py", "check"], cwd=ROOT, env=env, capture_output=True, text=True)
    assert result.returncode != 0 and "HELIOS_SECRET_KEY" in result.stderr


def test_production_refuses_to_start_without_an_audit_key(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "HELIOS_AUDIT_KEY"}
    env.update(HELIOS_ENV="production", HELIOS_VAR_DIR=str(tmp_path), HELIOS_SECRET_KEY="s" * 60)
    result = subprocess.run([sys.executable, "manage.py", "check"], cwd=ROOT, env=env, capture_output=True, text=True)
    assert result.returncode != 0 and "HELIOS_AUDIT_KEY" in result.stderr


def test_settings_helpers_read_what_they_understand(monkeypatch):
    from heliosweb import settings as s

    for text, want in (("1", True), ("TRUE", True), (" on ", True), ("no", False), ("Off", False), ("0", False)):
        monkeypatch.setenv("HELIOS_X", text)
        assert s.env_bool("HELIOS_X", not want) is want
    monkeypatch.setenv("HELIOS_X", "")
    assert (
        s.env_bool("HELIOS_X", True) is True and s.env_int("HELIOS_X", 7) == 7 and s.env_float("HELIOS_X", 0.5) == 0.5
    )
    monkeypatch.setenv("HELIOS_X", " 42 ")
    assert s.env_int("HELIOS_X", 0) == 42 and s.env_float("HELIOS_X", 0) == 42.0
    monkeypatch.setenv("HELIOS_X", "production")
    assert s.env_choice("HELIOS_X", "development", ("development", "production")) == "production"


def test_settings_helpers_refuse_what_they_do_not_understand(monkeypatch):
    import pytest
    from django.core.exceptions import ImproperlyConfigured

    from heliosweb import settings as s

    cases = [
        (lambda: s.env_bool("HELIOS_X", False), ("ture", "2", "enabled", "y")),
        (lambda: s.env_int("HELIOS_X", 1), ("3O", "1.5", "-1", "١٢", "1e3", "ten")),
        (lambda: s.env_int("HELIOS_X", 1, minimum=1), ("0",)),
        (lambda: s.env_float("HELIOS_X", 1.0), ("nan", "inf", "-2", "5s", "1_000")),
        (lambda: s.env_choice("HELIOS_X", "development", ("development", "production")), ("prod", "Production")),
    ]
    for read, texts in cases:
        for text in texts:
            monkeypatch.setenv("HELIOS_X", text)
            with pytest.raises(ImproperlyConfigured, match=r"HELIOS_X must be .*" + repr(text)):
                read()


def test_a_process_with_a_setting_it_cannot_read_refuses_to_start(tmp_path):
    env = dict(os.environ, HELIOS_DEBUG="ture", HELIOS_VAR_DIR=str(tmp_path))
    result = subprocess.run([sys.executable, "manage.py", "check"], cwd=ROOT, env=env, capture_output=True, text=True)
    assert result.returncode != 0
    assert "ImproperlyConfigured: HELIOS_DEBUG must be one of" in result.stderr and "'ture'" in result.stderr


def test_a_log_level_it_does_not_know_stops_the_process_naming_it(tmp_path):
    env = dict(os.environ, HELIOS_LOG_LEVEL="verbose", HELIOS_VAR_DIR=str(tmp_path))
    result = subprocess.run([sys.executable, "manage.py", "check"], cwd=ROOT, env=env, capture_output=True, text=True)
    assert result.returncode != 0
    assert "ImproperlyConfigured: HELIOS_LOG_LEVEL must be one of DEBUG, INFO" in result.stderr
