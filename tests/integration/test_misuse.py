"""Issue 15: a careless user never gets a traceback.

Every case runs the real CLI entry point (``scrollcase.cli.main``, in-process so the table stays fast)
in a scratch folder and asserts: the documented non-zero exit code, no traceback on stderr, exactly
one JSON error object on stdout under ``--json`` (whose ``exitCode`` is the exit code), and nothing
written outside the scratch folder's expected fixtures.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from scrollcase import cli
from tests.support.releases import write_release

REPO = Path(__file__).resolve().parents[2]
RELEASE = "dist/demo-box-1.0.0-linux-x86_64-cpu.release.json"
LONG = "x" * 256


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("misuse-dist")
    write_release(folder, cuda=None)
    return folder


@pytest.fixture
def scratch(tmp_path: Path, dist: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """cwd: dist/ (a CPU release), empty/, afile, link -> empty, dangling -> nowhere, loop -> loop, full/x."""
    work = tmp_path / "work"
    (work / "dist").mkdir(parents=True)
    for item in dist.iterdir():
        (work / "dist" / item.name).write_bytes(item.read_bytes())
    (work / "empty").mkdir()
    (work / "full").mkdir()
    (work / "full" / "x").write_text("x")
    (work / "afile").write_text("a file\n")
    (work / "link").symlink_to("empty")
    (work / "dangling").symlink_to("nowhere")
    (work / "loop").symlink_to("loop")
    bad = json.loads((work / RELEASE).read_text())
    for name, value in (("slash", "../outside.tar.zst"), ("absolute", "/etc/passwd")):
        bad["archive"]["name"] = value
        (work / "dist" / f"{name}.release.json").write_text(json.dumps(bad))
    (work / "dist" / "garbage.release.json").write_text("{not json")
    for key in [k for k in os.environ if k.startswith(("AWS_", "SCROLLCASE_", "GITHUB_"))]:
        monkeypatch.delenv(key)
    monkeypatch.setenv("AWS_CONFIG_FILE", os.devnull)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", os.devnull)
    monkeypatch.chdir(work)
    return work


def snapshot(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*")}


@dataclass(frozen=True)
class Case:
    id: str
    argv: tuple[str, ...]
    code: int
    env: tuple[tuple[str, str], ...] = ()


R = RELEASE
RECIPE = ("build", "tiny-mlp-linux-x86_64-cpu", "--recipes-root", str(REPO / "recipes"))
CASES = [
    # unpack
    Case("unpack-dest-symlink-to-empty", ("unpack", R, "link"), 2),
    Case("unpack-dest-dangling-symlink", ("unpack", R, "dangling"), 2),
    Case("unpack-dest-symlink-loop", ("unpack", R, "loop"), 2),
    Case("unpack-dest-below-a-file", ("unpack", R, "afile/box"), 2),
    Case("unpack-dest-name-too-long", ("unpack", R, LONG), 2),
    Case("unpack-empty-arguments", ("unpack", "", ""), 2),
    Case("unpack-dest-dot", ("unpack", R, "."), 2),
    Case("unpack-dest-not-empty", ("unpack", R, "full"), 2),
    Case("unpack-missing-archive", ("unpack", "nope.tar.zst", "box", "--sha256", "0" * 64), 8),
    Case("unpack-bad-sha256", ("unpack", "nope.tar.zst", "box", "--sha256", "zz"), 2),
    Case("unpack-size-not-a-number", ("unpack", R, "box", "--size", "abc"), 2),
    Case("unpack-manifest-plus-sha256", ("unpack", R, "box", "--sha256", "0" * 64), 2),
    Case("unpack-garbage-manifest", ("unpack", "dist/garbage.release.json", "box"), 8),
    Case("unpack-archive-name-with-slash", ("unpack", "dist/slash.release.json", "box"), 8),
    Case("unpack-missing-arguments", ("unpack",), 2),
    # verify
    Case("verify-missing-manifest", ("verify", "nope.release.json"), 2),
    Case("verify-junit-is-a-folder", ("verify", R, "--junit", "empty"), 2),
    Case("verify-junit-below-a-file", ("verify", R, "--junit", "afile/report.xml"), 2),
    Case("verify-garbage-manifest", ("verify", "dist/garbage.release.json"), 8),
    # publish
    Case("publish-to-empty", ("publish", R, "--to", ""), 2),
    Case("publish-archive-name-with-slash", ("publish", "dist/slash.release.json", "--to", "store"), 8),
    Case("publish-archive-name-absolute", ("publish", "dist/absolute.release.json", "--to", "store"), 8),
    Case("publish-endpoint-empty", ("publish", R, "--to", "s3://bucket/p", "--endpoint-url", ""), 2),
    Case("publish-endpoint-not-a-url", ("publish", R, "--to", "s3://bucket/p", "--endpoint-url", "not a url"), 2),
    Case(
        "publish-endpoint-env-garbage",
        ("publish", R, "--to", "s3://bucket/p"),
        2,
        (("AWS_ENDPOINT_URL_S3", "::garbage"),),
    ),
    Case("publish-endpoint-with-directory", ("publish", R, "--to", "store", "--endpoint-url", "http://x:1"), 2),
    Case("publish-unknown-scheme", ("publish", R, "--to", "ftp://host/x"), 2),
    Case("publish-store-is-a-file", ("publish", R, "--to", "afile"), 9),
    Case("publish-missing-manifest", ("publish", "nope.release.json", "--to", "store"), 2),
    # install
    Case("install-without-dest", ("install", "--store", "empty", "--box", "demo-box"), 2),
    Case("install-without-box", ("install", "--store", "empty", "box"), 2),
    Case("install-without-store", ("install", "--box", "demo-box", "box"), 2),
    Case("install-store-empty", ("install", "--store", "", "--box", "demo-box", "box"), 2),
    Case("install-unknown-scheme", ("install", "--store", "ftp://host/x", "--box", "demo-box", "box"), 2),
    Case("install-store-url-with-query", ("install", "--store", "https://h/x?sig=1", "--box", "demo-box", "box"), 2),
    Case(
        "install-endpoint-with-directory",
        ("install", "--store", "empty", "--box", "b", "box", "--endpoint-url", "http://x:1"),
        2,
    ),
    Case("install-list-with-dest", ("install", "--list", "--store", "empty", "--box", "demo-box", "box"), 2),
    Case("install-dest-symlink", ("install", "--store", "empty", "--box", "demo-box", "link"), 2),
    Case("install-dest-not-empty", ("install", "--store", "empty", "--box", "demo-box", "full"), 2),
    Case("install-store-without-the-box", ("install", "--store", "empty", "--box", "demo-box", "box"), 9),
    Case("install-store-is-a-file", ("install", "--store", "afile", "--box", "demo-box", "box"), 9),
    Case("install-nothing-listens", ("install", "--store", "http://127.0.0.1:9/s", "--box", "demo-box", "box"), 9),
    # build
    Case("build-out-is-a-file", (*RECIPE, "--out", "afile"), 2),
    Case("build-state-dir-is-a-file", (*RECIPE, "--state-dir", "afile"), 2),
    Case("build-junit-is-a-folder", (*RECIPE, "--junit", "empty"), 2),
    Case("build-out-name-too-long", (*RECIPE, "--out", LONG), 2),
    Case("build-unknown-recipe", ("build", "no-such-recipe"), 2),
    Case("build-bad-weights", (*RECIPE, "--weights", "some"), 2),
    # lock
    Case("lock-unknown-recipe", ("lock", "no-such-recipe"), 2),
    Case("lock-missing-argument", ("lock",), 2),
    # demo
    Case("demo-workdir-is-a-file", ("demo", "--workdir", "afile"), 2),
    Case("demo-workdir-below-a-file", ("demo", "--workdir", "afile/demo"), 2),
    # the command line itself
    Case("no-command", (), 2),
    Case("unknown-command", ("frobnicate",), 2),
    Case("unknown-option", ("verify", R, "--frob"), 2),
]


def run_cli(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = cli.main(argv)
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_misuse_fails_cleanly(
    case: Case, scratch: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    for key, value in case.env:
        monkeypatch.setenv(key, value)
    before = snapshot(scratch)
    argv = [*case.argv[:1], "--json", *case.argv[1:]] if case.argv else ["--json"]
    code, out, err = run_cli(argv, capsys)
    assert code == case.code, f"exit {code}, expected {case.code}\n{err}"
    assert "Traceback" not in err, err
    error = json.loads(out)
    assert isinstance(error, dict) and error["exitCode"] == code and error["message"], out
    assert snapshot(scratch) == before, "the failed command wrote into the scratch folder"


def test_enough_cases_across_commands() -> None:
    assert len(CASES) >= 30
    assert {c.argv[0] for c in CASES if c.argv} >= {"unpack", "verify", "publish", "install", "build", "lock", "demo"}


def test_long_dest_name_unpacks_although_the_temp_name_beside_it_would_be_too_long(
    scratch: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Defect 5: a 250-byte DEST name made the temp name ".<DEST>.XXXX.unpacking" exceed 255 bytes."""
    code, _, err = run_cli(["unpack", "--json", R, "y" * 250], capsys)
    assert code == 0, err
    assert (scratch / ("y" * 250) / "payload.bin").is_file()
    assert not [p for p in scratch.iterdir() if p.name.endswith(".unpacking")]


# ------------------------------------------------------------------------------ the error boundary


def boom(exc: BaseException) -> Callable[..., int]:
    def handler(args: object, console: object) -> int:
        raise exc

    return handler


def run_with_handler(
    handler: Callable[..., int], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> tuple[int, dict[str, object], str]:
    import argparse

    real_parse = cli._Parser.parse_args

    def parse(self: argparse.ArgumentParser, argv: list[str] | None = None) -> argparse.Namespace:
        ns: argparse.Namespace = real_parse(self, argv)
        ns.handler = handler
        return ns

    monkeypatch.setattr(cli._Parser, "parse_args", parse)
    code, out, err = run_cli(["verify", "--json", "x.release.json"], capsys)
    return code, json.loads(out), err


def test_boundary_turns_an_os_error_into_a_located_error(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import errno

    code, data, err = run_with_handler(
        boom(IsADirectoryError(errno.EISDIR, "Is a directory", "some/report.xml")), monkeypatch, capsys
    )
    assert code == 2 and data["error"] == "UsageError"
    assert "some/report.xml" in str(data["message"]) and "Is a directory" in str(data["message"])
    assert "Traceback" not in err
    code, data, err = run_with_handler(
        boom(OSError(errno.ENOSPC, "No space left on device", "out/x")), monkeypatch, capsys
    )
    assert code == 1 and "out/x" in str(data["message"]) and "(None)" not in err


def test_boundary_value_error_is_a_usage_error_with_traceback_only_on_request(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    code, data, err = run_with_handler(boom(ValueError("embedded null byte")), monkeypatch, capsys)
    assert code == 2 and "embedded null byte" in str(data["message"]) and "Traceback" not in err
    monkeypatch.setenv(cli.DEBUG_ENV, "1")
    code, data, err = run_with_handler(boom(ValueError("embedded null byte")), monkeypatch, capsys)
    assert code == 2 and "Traceback" in err


def test_boundary_keeps_real_bugs_visible(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    code, data, err = run_with_handler(boom(KeyError("oops")), monkeypatch, capsys)
    assert code == 70 and data["error"] == "InternalError"
    assert "Traceback" in err and "KeyError" in err and "please report" in err


SIGTERM_MIDWAY = """
import os, signal, sys
from scrollcase import cli
from scrollcase.format.archive import unpack as unpack_mod

real = unpack_mod.unpack_archive

def killed_midway(*args, **kwargs):
    kwargs["on_bytes"] = lambda count: os.kill(os.getpid(), signal.SIGTERM)
    return real(*args, **kwargs)

# The library function, patched before cli.main imports the command modules (they bind it then).
unpack_mod.unpack_archive = killed_midway
sys.exit(cli.main(sys.argv[1:]))
"""


def test_sigterm_cleans_up_like_sigint(scratch: Path) -> None:
    """Defect 6: SIGTERM (a CI timeout, a container stop) during unpack left the temp folder beside DEST;
    now it is cleaned up as for SIGINT and the exit code is 143."""
    import subprocess
    import sys

    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run(
        [sys.executable, "-c", SIGTERM_MIDWAY, "unpack", R, "box"],
        cwd=scratch,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 143, done.stderr
    assert "terminated" in done.stderr and "Traceback" not in done.stderr
    assert not (scratch / "box").exists()
    assert not [p for p in scratch.iterdir() if p.name.endswith(".unpacking")]


def test_sigint_cleans_up_and_exits_130(scratch: Path) -> None:
    """README.md exit codes: "130 | interrupted (SIGINT)"; docs/archive.md: "SIGINT and SIGTERM ...
    delete the temp folder before exiting (130, 143)"."""
    import subprocess
    import sys

    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run(
        [sys.executable, "-c", SIGTERM_MIDWAY.replace("SIGTERM", "SIGINT"), "unpack", R, "box", "--json"],
        cwd=scratch,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 130, done.stderr
    assert "interrupted" in done.stderr and "Traceback" not in done.stderr
    assert not (scratch / "box").exists()
    assert not [p for p in scratch.iterdir() if p.name.endswith(".unpacking")]


def test_a_full_disk_during_unpack_is_exit_5_and_leaves_nothing(
    scratch: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """docs/archive.md (unpack --json): "5 (`BuildError`) when the disk refuses (full, permissions)".
    The disk fills up while the box is written (ENOSPC from the first os.write)."""
    import errno

    from scrollcase.format.archive import unpack as unpack_mod

    def full(fd: int, data: object) -> int:
        raise OSError(errno.ENOSPC, "No space left on device")

    before = snapshot(scratch)
    monkeypatch.setattr(unpack_mod.os, "write", full)
    code = cli.main(["unpack", R, "box", "--json"])
    monkeypatch.undo()
    out, err = capsys.readouterr()
    data = json.loads(out)
    assert (code, data["exitCode"], data["error"]) == (5, 5, "BuildError"), data
    assert "No space left on device" in data["message"] and "Traceback" not in err
    assert snapshot(scratch) == before


def test_stale_temp_folders_of_dead_unpacks_are_removed_live_ones_kept(
    scratch: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Defect 6: a SIGKILLed unpack left .DEST.*.unpacking that no rerun removed."""
    import subprocess
    import sys

    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True, check=True
    )
    stale = scratch / f".box.{dead.stdout.strip()}-abc123.unpacking"
    (stale / "venv").mkdir(parents=True)
    live = scratch / f".box.{os.getppid()}-def456.unpacking"
    live.mkdir()
    code, _, err = run_cli(["unpack", R, "box"], capsys)
    assert code == 0, err
    assert not stale.exists() and live.exists()


def test_the_loser_of_two_unpacks_into_one_dest_fails_cleanly(
    scratch: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Defect 5: the second of two concurrent unpacks into the same DEST ended in a traceback."""
    from scrollcase.format.archive import unpack as unpack_mod

    real = unpack_mod._relocate

    def winner_finishes_first(tmp: Path, final: Path, label: str) -> int:
        count = real(tmp, final, label)
        final.mkdir()
        (final / "winner.txt").write_text("the other unpack's box")
        return count

    monkeypatch.setattr(unpack_mod, "_relocate", winner_finishes_first)
    code, out, err = run_cli(["unpack", "--json", R, "box"], capsys)
    assert code == 2, err
    assert "Traceback" not in err and "appeared while this unpack ran" in json.loads(out)["message"]
    assert sorted(p.name for p in (scratch / "box").iterdir()) == ["winner.txt"]
    assert not [p for p in scratch.iterdir() if p.name.endswith(".unpacking")]


def test_defect8_unpack_refuses_a_manifest_that_names_another_release_than_box_json(
    scratch: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """unpack accepted a manifest whose version/target disagree with box.json (only verify checked)."""
    raw = json.loads((scratch / R).read_text())
    raw["version"] = "9.9.9"
    raw["target"]["arch"] = "aarch64"
    (scratch / R).write_text(json.dumps(raw))
    code, out, err = run_cli(["unpack", "--json", R, "box"], capsys)
    assert code == 8, err
    assert {p["key"] for p in json.loads(out)["problems"]} == {"version", "target", "keys"}
    assert not (scratch / "box").exists()
