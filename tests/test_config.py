from __future__ import annotations

import re
from pathlib import Path

import pytest

from nixx.config import Settings, is_loopback_host, load_settings
from nixx.errors import ConfigError

DOC = Path(__file__).resolve().parents[1] / "docs" / "configuration.md"


def test_every_setting_is_documented_and_every_documented_variable_exists() -> None:
    text = DOC.read_text()
    documented = set(re.findall(r"`(NIXX_[A-Z_]+)`", text))
    fields = {f"NIXX_{name.upper()}" for name in Settings.model_fields}
    assert fields - documented == set(), "settings missing from docs/configuration.md"
    assert documented - fields == set(), "docs/configuration.md names unknown variables"


def test_env_overrides_config_file_which_overrides_defaults(
    nixx_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (nixx_home / "config.toml").write_text("summary_interval = 500\nport = 9000\n")
    monkeypatch.setenv("NIXX_PORT", "9100")
    s = load_settings()
    assert s.summary_interval == 500
    assert s.port == 9100
    assert s.intent_interval == 10
    assert s.database_url == f"sqlite:///{nixx_home / 'nixx.db'}"


def test_bad_value_names_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NIXX_SUMMARY_INTERVAL", "-3")
    with pytest.raises(ConfigError, match="NIXX_SUMMARY_INTERVAL"):
        load_settings()


def test_malformed_config_file_is_a_config_error(nixx_home: Path) -> None:
    (nixx_home / "config.toml").write_text("port = = 3\n")
    with pytest.raises(ConfigError, match="config.toml"):
        load_settings()


@pytest.mark.parametrize(
    ("host", "loopback"),
    [("127.0.0.1", True), ("::1", True), ("localhost", True), ("0.0.0.0", False), ("10.0.0.2", False)],
)
def test_loopback_detection(host: str, loopback: bool) -> None:
    assert is_loopback_host(host) is loopback


def test_unknown_config_key_names_the_nearest(nixx_home: Path) -> None:
    (nixx_home / "config.toml").write_text("summry_interval = 500\n")
    with pytest.raises(ConfigError, match="did you mean summary_interval"):
        load_settings()


def test_unknown_variable_names_the_nearest(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NIXX_SUMMRY_INTERVAL", "500")
    with pytest.raises(ConfigError, match="NIXX_SUMMRY_INTERVAL.*did you mean NIXX_SUMMARY_INTERVAL"):
        load_settings()


def test_bad_value_in_the_file_names_file_and_key(nixx_home: Path) -> None:
    (nixx_home / "config.toml").write_text("port = 70000\n")
    with pytest.raises(ConfigError) as info:
        load_settings()
    assert f"{nixx_home / 'config.toml'}: port" in info.value.message
    assert "NIXX_PORT" not in info.value.message


@pytest.mark.parametrize("var", ["NIXX_CHAT_BASE_URL", "NIXX_EMBED_BASE_URL"])
def test_base_url_needs_a_scheme(monkeypatch: pytest.MonkeyPatch, var: str) -> None:
    monkeypatch.setenv(var, "127.0.0.1:23917")
    with pytest.raises(ConfigError, match=f"{var}: .*write http://127.0.0.1:23917"):
        load_settings()
