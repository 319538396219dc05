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
