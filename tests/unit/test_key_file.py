"""The daemon's signing key file (``service.daemon.load_signer``): created once, mode 0600, and
read back as the same key, so blocks signed before a restart still verify after it."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from roundtabled.service.daemon import load_signer


def test_a_missing_key_file_is_created_private_and_read_back_the_same(tmp_path: Path) -> None:
    path = tmp_path / "config" / "roundtabled" / "signing-key"
    first = load_signer(path)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert len(bytes.fromhex(path.read_text())) == 32
    again = load_signer(path)
    mac = first.mac("state", "ses_1", b"{}")
    assert again.verify("state", "ses_1", b"{}", mac)
    assert list(path.parent.iterdir()) == [path]  # no temporary file left


def test_a_key_file_too_short_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "signing-key"
    path.write_text("00ff")
    with pytest.raises(ValueError, match="at least 16 bytes"):
        load_signer(path)
