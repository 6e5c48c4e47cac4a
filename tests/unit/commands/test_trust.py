"""`scrollcase trust`, through the CLI in this process: each action's options checked before the store is touched
(exit 2 naming the option), the store's refusals (exit 13), and status/timestamp/rotate on a directory store."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from scrollcase import cli


def trust(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, dict[str, object], str]:
    code = cli.main(["trust", *args, "--json"])
    out, err = capsys.readouterr()
    return code, json.loads(out), err


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["status", "--role", "root"], "trust status takes no --role"),
        (["timestamp", "--box", "a"], "trust timestamp takes no --box"),
        (["init"], "trust init needs --keys DIR"),
        (["rotate", "--keys", "k", "--role", "timestamp"], "trust rotate needs --keys DIR"),
        (["init", "--keys", "k", "--root-threshold", "0"], "--root-threshold 0 is not a positive number"),
        (["timestamp", "--timestamp-expires", "0"], "--timestamp-expires 0: an expiry is a positive number of days"),
    ],
)
def test_wrong_options_are_usage_errors_before_the_store_is_touched(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    code, error, _ = trust(capsys, *args, "--store", str(tmp_path / "store"))
    assert code == 2 and message in str(error["message"])
    assert not (tmp_path / "store").exists()


def test_status_and_timestamp_of_a_store_without_metadata_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "store").mkdir()
    for action in ("status", "timestamp"):
        code, error, _ = trust(capsys, action, "--store", str(tmp_path / "store"), "--keys", str(tmp_path))
        assert code == 13 and "has no signed metadata" in str(error["message"]), action
        assert "scrollcase trust init" in str(error["fix"])


def test_init_status_timestamp_and_rotate(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    store, keys = str(tmp_path / "store"), tmp_path / "keys"
    code, init, _ = trust(capsys, "init", "--store", store, "--keys", str(keys), "--root-threshold", "2")
    assert code == 0 and init["boxes"] == [] and (keys / "root-2.pem").is_file()
    code, again, _ = trust(capsys, "init", "--store", store, "--keys", str(keys))
    assert code == 13 and "already set up" in str(again["message"])

    code, status, _ = trust(capsys, "status", "--store", store)
    assert code == 0 and status["root"] == status["root"] | {"version": 1, "threshold": 2}  # type: ignore[operator]

    monkeypatch.setenv("SCROLLCASE_TUF_TIMESTAMP_KEY", (keys / "timestamp.pem").read_text())
    code, fresh, _ = trust(capsys, "timestamp", "--store", store)  # the environment's key alone
    assert code == 0 and fresh["written"] == ["tuf/timestamp.json"] and fresh["expiring"] == {}

    new_key = tmp_path / "snapshot-2.pem"
    rotate = ["rotate", "--store", store, "--keys", str(keys), "--role", "snapshot", "--new-key", str(new_key)]
    code, rotated, _ = trust(capsys, *rotate)
    assert code == 0 and rotated["keysGenerated"] == [str(new_key)] and new_key.is_file()
    assert rotated["written"] == ["tuf/2.root.json", "tuf/2.snapshot.json", "tuf/timestamp.json"]
    assert (keys / "root.json").read_bytes() == (tmp_path / "store" / "tuf" / "2.root.json").read_bytes()

    (keys / "root-2.pem").unlink()  # below the root's threshold of 2: no new root
    code, refused, _ = trust(capsys, *rotate[:-1], str(tmp_path / "snapshot-3.pem"))
    assert code == 13 and "are not 2 of the keys tuf/2.root.json names" in str(refused["message"])
