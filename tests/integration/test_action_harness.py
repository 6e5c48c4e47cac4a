"""Each composite action run step by step as GitHub would (see action_harness.py), on generated
recipes: outputs, step summaries and annotations are what a workflow sees."""

from __future__ import annotations

import argparse
import json
import shlex
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from scrollcase.cli import build_parser
from scrollcase.reports.junit import JUnitCase, write_junit
from scrollcase.store.local import LocalStore
from scrollcase.store.signing import init_store
from scrollcase.trust.keys import generate_keys
from tests.github_helpers import write_recipe
from tests.integration.action_harness import (
    ROOT,
    ActionResult,
    Harness,
    scrollcase_venv,
    setup_script,
    standard_uses,
)
from tests.support.releases import write_release

ACTIONS = ROOT / "actions"
pytestmark = pytest.mark.slow  # each action runs several real interpreters (~3 s per action)


def has_command(name: str) -> bool:
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return name in sub.choices


def needs_command(name: str) -> None:
    """Every command an action runs is on this branch: a removed one is a failure, never a skip."""
    assert has_command(name), f"`scrollcase {name}` is missing, but an action runs it"


def git(cwd: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@example.org", *args], cwd=cwd, check=True, capture_output=True
    )


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A git repository with three recipes on main and a branch that changes the CUDA one."""
    workspace = tmp_path / "workspace"
    for target in ("linux-x86_64-cpu", "linux-x86_64-cuda12.4", "osx-arm64-metal"):
        write_recipe(workspace / "recipes", "tiny-mlp", target)
    git(tmp_path, "init", "-q", "-b", "main", str(workspace))
    git(workspace, "add", ".")
    git(workspace, "commit", "-q", "-m", "recipes")
    git(workspace, "checkout", "-q", "-b", "pr")
    (workspace / "recipes" / "tiny-mlp-linux-x86_64-cuda12.4" / "pixi.lock").write_text("version: 6\n")
    git(workspace, "add", ".")
    git(workspace, "commit", "-q", "-m", "lock")
    return workspace


@pytest.fixture
def harness(repo: Path, tmp_path: Path) -> Harness:
    temp = tmp_path / "runner-temp"
    temp.mkdir()
    scrollcase_venv(temp)
    return Harness(
        workspace=repo,
        runner_temp=temp,
        uses_outputs=standard_uses(),
        event={"pull_request": {"head": {"sha": "a" * 40}, "base": {"sha": "b" * 40}}},
    )


def test_matrix_action_selects_the_changed_recipe(harness: Harness) -> None:
    result = harness.run(ACTIONS / "matrix", {"changed-since": "main"})
    assert not result.failed, result.log()
    matrix = json.loads(result.outputs["matrix"])
    assert [e["recipeId"] for e in matrix["include"]] == ["tiny-mlp-linux-x86_64-cuda12.4"]
    assert matrix["include"][0]["runs-on"][:2] == ["self-hosted", "linux"]
    assert result.outputs["empty"] == "false" and result.outputs["count"] == "1"
    assert result.annotations == []
    # The nested actions got what the action promises: no PATH change, a venv cache under RUNNER_TEMP.
    setup = result.step("Set up Python for scrollcase")
    assert setup.with_ == {"python-version": "3.11", "update-environment": "false"}
    located = result.step("Locate scrollcase").outputs
    assert located["venv"] == str(harness.runner_temp / "scrollcase-venv")
    assert located["key"].startswith("scrollcase-venv-Linux-X64-3.11")
    # The venv already holds this key (as after a cache hit, or an earlier action of the job): reused as is.
    assert located["cache"] == "false" and result.step("Restore scrollcase's venv").status == "skipped"
    install = result.step("Install scrollcase")
    assert install.status == "success" and "reusing" in install.stdout, result.log()


def test_matrix_action_empty_and_hosted_only(harness: Harness) -> None:
    git(harness.workspace, "checkout", "-q", "main")
    empty = harness.run(ACTIONS / "matrix", {"changed-since": "main"})
    expected = {"matrix": '{"include":[]}', "empty": "true", "count": "0", "published": ""}  # no unpublished-in
    assert empty.outputs == expected, empty.log()
    hosted = harness.run(ACTIONS / "matrix", {"hosted-only": "true"})
    entries = json.loads(hosted.outputs["matrix"])["include"]
    assert [e["targetId"] for e in entries] == ["linux-x86_64-cpu", "osx-arm64-metal"]


def test_matrix_action_runner_map_and_all_on_inputs(harness: Harness) -> None:
    (harness.workspace / "runners.yml").write_text('version: 1\nrunners:\n  "*-cpu": [cpu-pool]\n')
    (harness.workspace / "docs.md").write_text("changed\n")
    git(harness.workspace, "add", ".")
    git(harness.workspace, "commit", "-q", "-m", "docs")
    result = harness.run(
        ACTIONS / "matrix", {"changed-since": "main", "runner-map": "runners.yml", "all-on": "docs.md\n*.txt\n"}
    )
    entries = json.loads(result.outputs["matrix"])["include"]
    assert len(entries) == 3, result.log()
    assert next(e for e in entries if e["targetId"] == "linux-x86_64-cpu")["runs-on"] == ["cpu-pool"]


def test_matrix_action_affects_all_is_the_repositorys_to_set(harness: Harness) -> None:
    """By default a workflow change selects every recipe and nothing else outside recipes/ does
    (pyproject.toml is an adopter's own business); the input replaces that list, and empty turns it off."""
    (harness.workspace / ".github" / "workflows").mkdir(parents=True)
    (harness.workspace / ".github" / "workflows" / "boxes.yml").write_text("name: boxes\n")
    (harness.workspace / "pyproject.toml").write_text("[project]\nname = 'models'\n")
    git(harness.workspace, "add", ".")
    git(harness.workspace, "commit", "-q", "-m", "workflow")

    def count(inputs: dict[str, str]) -> str:
        result = harness.run(ACTIONS / "matrix", {"changed-since": "main", **inputs})
        assert not result.failed, result.log()
        return result.outputs["count"]

    assert count({}) == "3"
    assert count({"affects-all": ""}) == "1"  # only the recipe this branch changed
    assert count({"affects-all": "docs/*\n"}) == "1"
    assert count({"affects-all": "docs/*\npyproject.toml\n"}) == "3"


def test_matrix_action_bad_recipe_fails_with_an_annotation(harness: Harness) -> None:
    recipe = harness.workspace / "recipes" / "tiny-mlp-linux-x86_64-cpu" / "recipe.json"
    data = json.loads(recipe.read_text())
    data["target"]["accelerator"] = "gpu"
    recipe.write_text(json.dumps(data))
    result = harness.run(ACTIONS / "matrix", {})
    assert result.failed and result.step("Compute the matrix").status == "failure"
    assert any(
        a.startswith("::error file=recipes/tiny-mlp-linux-x86_64-cpu/recipe.json") and "target.accelerator" in a
        for a in result.annotations
    ), result.log()


def logging_base_python(tmp_path: Path, pip_version: str = "24.0", uv_wheel: bool = True) -> tuple[Path, Path]:
    """A stand-in for setup-python's interpreter that logs its `-m venv` and `-m pip` calls.

    The venv it "creates" has a python that runs this test's interpreter (so the action's later
    steps run scrollcase), except for `-m pip`, which is logged as ``venv-pip`` and never run: a
    real pip there would install the action's checkout into the venv running the tests (that
    happened: a non-editable copy of scrollcase shadowed the editable install).  ``pip_version``
    below 22.3 makes setup_scrollcase.py take its old-pip branch, the venv's own pip.  Installing
    ``uv...`` into the venv leaves a ``uv`` there that logs its calls as ``uv ...`` (``uv_wheel``
    False: that install fails, as on a platform without a uv wheel)."""
    log = tmp_path / "calls.log"
    base = tmp_path / "base-python"
    venv_python = (
        f'#!/bin/bash\nif [ "$1 $2" = "-m pip" ]; then echo "venv-pip $*" >> "{log}"; exit 0; fi\n'
        f'PYTHONPATH="{ROOT}" exec "{sys.executable}" "$@"\n'
    )
    uv = f'#!/bin/bash\necho "uv $*" >> "{log}"\n'
    base.write_text(f"""#!/bin/bash
if [ "$1 $2 $3" = "-m pip --version" ]; then echo "pip {pip_version} from /base (python 3.11)"; exit 0; fi
if [ "$1 $2" = "-m pip" ]; then
  echo "pip $*" >> "{log}"
  prev=""; for a in "$@"; do if [ "$prev" = "--python" ]; then target="$a"; fi; prev="$a"; done
  case "${{@: -1}}" in uv*)
    {"" if uv_wheel else "exit 1"}
    printf '%s' {shlex.quote(uv)} > "$(dirname "$target")/uv"; chmod +x "$(dirname "$target")/uv";;
  esac
  exit 0
fi
if [ "$1 $2" = "-m venv" ]; then
  echo "venv $*" >> "{log}"
  venv="${{@: -1}}"
  mkdir -p "$venv/bin"
  printf '%s' {shlex.quote(venv_python)} > "$venv/bin/python"
  chmod +x "$venv/bin/python"
  exit 0
fi
exec "{sys.executable}" "$@"
""")
    base.chmod(0o755)
    return base, log


def assert_running_venv_untouched() -> None:
    """No copy of scrollcase in the site-packages of the interpreter running the tests (its editable
    install is a .pth file and a finder, never a ``scrollcase/`` folder)."""
    for key in ("purelib", "platlib"):
        site = Path(sysconfig.get_paths()[key])
        assert not (site / "scrollcase").exists(), f"a test pip-installed scrollcase into {site}"


def test_cache_off_installs_scrollcase_from_the_action_path(harness: Harness, tmp_path: Path) -> None:
    """With cache: false the venv is created by the base python and scrollcase pip-installed from
    the action's own checkout (two folders above actions/<name>)."""
    shutil.rmtree(harness.runner_temp / "scrollcase-venv")
    base, log = logging_base_python(tmp_path)
    harness.uses_outputs = standard_uses(cache_hit=False, base_python=str(base))
    harness.extra_env = {"PATH": "/usr/bin:/bin", "PIP_FIND_LINKS": "/wheels /more", "PIP_NO_INDEX": "1"}
    result = harness.run(ACTIONS / "matrix", {"cache": "false"})
    assert not result.failed, result.log()
    assert result.step("Restore scrollcase's venv").status == "skipped"
    assert result.step("Install scrollcase").status == "success"
    calls = log.read_text().splitlines()
    venv = harness.runner_temp / "scrollcase-venv"
    assert calls[0] == f"venv -m venv --clear --without-pip {venv}"
    # setup-python's own pip (no ensurepip) puts the uv scrollcase requires into the venv, alone ...
    requirement = setup_script().uv_requirement(ROOT)
    assert requirement.startswith("uv>=")
    assert calls[1].startswith(f"pip -m pip --python {venv}/bin/python install") and calls[1].endswith(
        f" --no-deps --no-compile {requirement}"
    )
    # ... and that uv installs the action's checkout, with pip's offline settings as its own options
    assert calls[2] == (
        f"uv pip install --quiet --python {venv}/bin/python --find-links /wheels --find-links /more --no-index {ROOT}"
    )
    assert len(calls) == 3 and "with uv" in result.step("Install scrollcase").stdout
    assert json.loads(result.outputs["matrix"])["include"]
    assert_running_venv_untouched()


def test_without_a_uv_wheel_pip_installs_everything(harness: Harness, tmp_path: Path) -> None:
    shutil.rmtree(harness.runner_temp / "scrollcase-venv")
    base, log = logging_base_python(tmp_path, uv_wheel=False)
    harness.uses_outputs = standard_uses(cache_hit=False, base_python=str(base))
    harness.extra_env = {"PATH": "/usr/bin:/bin"}
    result = harness.run(ACTIONS / "matrix", {"cache": "false"})
    assert not result.failed, result.log()
    calls = log.read_text().splitlines()
    assert [c.split()[0] for c in calls] == ["venv", "pip", "pip"] and calls[2].endswith(f" {ROOT}")
    assert "with pip" in result.step("Install scrollcase").stdout
    assert_running_venv_untouched()


def test_old_pip_installs_with_the_venvs_own_pip(harness: Harness, tmp_path: Path) -> None:
    """A base pip older than 22.3 has no --python: the venv gets its own pip and installs with it."""
    shutil.rmtree(harness.runner_temp / "scrollcase-venv")
    base, log = logging_base_python(tmp_path, pip_version="21.3")
    harness.uses_outputs = standard_uses(cache_hit=False, base_python=str(base))
    harness.extra_env = {"PATH": "/usr/bin:/bin"}
    result = harness.run(ACTIONS / "matrix", {"cache": "false"})
    assert not result.failed, result.log()
    venv = harness.runner_temp / "scrollcase-venv"
    calls = log.read_text().splitlines()
    assert calls[0] == f"venv -m venv --clear --without-pip {venv}"
    assert calls[1] == f"venv -m venv --clear {venv}"
    assert calls[2].startswith("venv-pip -m pip install") and calls[2].endswith(f" {ROOT}")
    assert len(calls) == 3
    assert_running_venv_untouched()


def test_second_action_in_a_job_reuses_the_venv(harness: Harness, tmp_path: Path) -> None:
    """Defect 6: build + parity + verify in one job installed scrollcase three times and each post step
    saved the same cache key again.  The first action installs; the next ones reuse that venv and skip
    actions/cache altogether."""
    shutil.rmtree(harness.runner_temp / "scrollcase-venv")
    base, log = logging_base_python(tmp_path)
    harness.uses_outputs = standard_uses(cache_hit=False, base_python=str(base))
    harness.extra_env = {"PATH": "/usr/bin:/bin"}
    first = harness.run(ACTIONS / "matrix", {})
    assert not first.failed, first.log()
    assert first.step("Restore scrollcase's venv").status == "success"  # a miss: its post step saves the key
    assert [c.split()[0] for c in log.read_text().splitlines()] == ["venv", "pip", "uv"]
    second = harness.run(ACTIONS / "matrix", {"hosted-only": "true"})
    third = harness.run(ROOT, {"command": "matrix", "args": "--recipes\nrecipes"})
    for later in (second, third):
        assert not later.failed, later.log()
        assert later.step("Locate scrollcase").outputs["cache"] == "false"
        assert later.step("Restore scrollcase's venv").status == "skipped"  # no second save of the key
        assert "reusing" in later.step("Install scrollcase").stdout
    assert len(log.read_text().splitlines()) == 3  # still the one venv and the one install
    assert_running_venv_untouched()


def test_cache_key_covers_package_data(tmp_path: Path) -> None:
    """Defect 7: the key hashed pyproject.toml and *.py only, so a change to scrollcase/data/** restored
    a stale venv.  Every file of the package is in the key now."""
    src = tmp_path / "src"  # the action's own checkout, as a runner downloads it
    src.mkdir()
    shutil.copy2(ROOT / "pyproject.toml", src / "pyproject.toml")
    shutil.copytree(ROOT / "actions", src / "actions")
    shutil.copytree(ROOT / "scrollcase", src / "scrollcase", ignore=shutil.ignore_patterns("__pycache__"))
    temp = tmp_path / "temp"
    temp.mkdir()
    base, log = logging_base_python(tmp_path)  # installs nothing for real
    harness = Harness(
        workspace=tmp_path,
        runner_temp=temp,
        uses_outputs=standard_uses(cache_hit=False, base_python=str(base)),
        extra_env={"PATH": "/usr/bin:/bin"},  # no real uv: the stand-in's logs it
    )

    def key() -> str:
        result = harness.run(src / "actions" / "matrix", {"recipes": "."})
        return result.step("Locate scrollcase").outputs["key"]

    before = key()
    data = src / "scrollcase" / "data" / "demo" / "recipe.json"
    data.write_text(data.read_text(encoding="utf-8") + " ", encoding="utf-8")
    after_data = key()
    assert after_data != before
    (src / "scrollcase" / "__pycache__").mkdir(exist_ok=True)
    (src / "scrollcase" / "__pycache__" / "x.cpython-311.pyc").write_bytes(b"compiled")
    assert key() == after_data  # bytecode is not a source
    assert [line.split()[0] for line in log.read_text().splitlines()] == ["venv", "pip", "uv"] * 2
    assert_running_venv_untouched()


def test_windows_runner_uses_the_scripts_layout(harness: Harness) -> None:
    """On Windows a venv's interpreter is Scripts/python.exe; the cache key names the OS."""
    harness.runner_os = "Windows"
    scrollcase_venv(harness.runner_temp, windows=True)
    (harness.runner_temp / "scrollcase-venv" / "bin" / "python").unlink()
    result = harness.run(ACTIONS / "matrix", {})
    assert not result.failed, result.log()
    located = result.step("Locate scrollcase").outputs
    assert located["python"] == f"{harness.runner_temp}/scrollcase-venv/Scripts/python.exe"
    assert located["key"].startswith("scrollcase-venv-Windows-X64-")
    assert result.step("Compute the matrix").env["SCROLLCASE_PYTHON"] == located["python"]
    assert result.outputs["count"] == "3"


def test_root_action_runs_any_command_with_one_argument_per_line(harness: Harness) -> None:
    result = harness.run(ROOT, {"command": "matrix", "args": "--recipes\nrecipes\n--hosted-only\n"})
    assert not result.failed, result.log()
    assert result.outputs["empty"] == "false" and result.outputs["count"] == "2"
    assert harness.run(ROOT, {"command": "matrix", "args": "--recipes\nno such dir"}).failed


def make_junit(harness: Harness, failures: int) -> Path:
    cases = [
        JUnitCase(
            f"check {i}",
            "selftest.code",
            passed=False,
            message=f"assert {i} failed",
            file="recipes/tiny-mlp-linux-x86_64-cpu/recipe.json",
            line=i + 1,
        )
        for i in range(failures)
    ]
    cases.append(JUnitCase("import json", "selftest.import", passed=True))
    return write_junit(harness.runner_temp / "given.xml", "self-test", cases)


def test_lock_check_action(harness: Harness) -> None:
    needs_command("lock-check")
    result = harness.run(ACTIONS / "lock-check", {"recipes": "tiny-mlp-linux-x86_64-cpu"})
    # The generated recipes have no committed lock: the check must fail and say where.
    assert result.failed, result.log()
    assert any("tiny-mlp-linux-x86_64-cpu" in a for a in result.annotations), result.log()
    assert Path(result.outputs["result-json"]).is_file()
    # The check step leaves its annotations to the report step (one per problem), which writes the summary.
    assert not [a for a in result.step("Check the locks").stdout.splitlines() if a.startswith("::error")]
    errors = [a for a in result.annotations if a.startswith("::error ")]
    assert errors and all(a.startswith("::error file=recipes/tiny-mlp-linux-x86_64-cpu") for a in errors), result.log()
    assert result.outputs["junit"].endswith("lock-check.xml") and Path(result.outputs["junit"]).is_file()
    assert result.outputs["conclusion"] == "failure" and int(result.outputs["failed"]) == len(errors)
    assert f"**0 passed, {len(errors)} failed, 0 skipped**" in result.step("Report results").summary


def test_lock_check_action_passes_channel_overrides(harness: Harness) -> None:
    """channel-overrides reaches lock-check as SCROLLCASE_CHANNEL_OVERRIDES, newlines made commas: a
    malformed pair is refused, naming the variable's format."""
    needs_command("lock-check")
    inputs = {"recipes": "tiny-mlp-linux-x86_64-cpu", "channel-overrides": "conda-forge=file:///m/cf\nbad-pair\n"}
    result = harness.run(ACTIONS / "lock-check", inputs)
    assert result.failed
    error = json.loads(result.step("Check the locks").stdout)
    assert error["error"] == "UsageError" and "'bad-pair'" in error["message"], result.log()


def test_verify_action_reports_junit_annotations_and_summary(harness: Harness) -> None:
    needs_command("verify")
    result = harness.run(ACTIONS / "verify", {"release": "missing.release.json"})
    assert result.failed and result.step("Verify the box").status == "failure"
    assert result.outputs["junit"].endswith("verify-missing.xml")
    report = result.step("Report results")
    assert report.status == "success", result.log()
    # Defect 9: no report was written, so the summary says so instead of an empty "0 of 0" table.
    assert "No results" in report.summary and "of 0" not in report.summary, report.summary
    assert result.outputs["conclusion"] == "missing"


def test_publish_action_exposes_release_keys_before_uploading(harness: Harness) -> None:
    needs_command("publish")
    inputs = {"release": "missing.release.json", "to": str(harness.runner_temp)}
    result = harness.run(ACTIONS / "publish", inputs)
    assert result.failed and result.step("Describe the release").status == "failure", result.log()
    assert result.step("Publish the box").status == "skipped"  # nothing uploads without a valid manifest


def test_publish_action_describes_the_keys_and_urls_it_then_publishes_to(harness: Harness) -> None:
    """Issue 30: "Describe the release" listed the manifest's keys; it lists where publish puts each object."""
    needs_command("publish")
    release = write_release(harness.workspace / "dist")
    store = harness.runner_temp / "store"
    result = harness.run(ACTIONS / "publish", {"release": str(release.manifest_path), "to": str(store)})
    assert not result.failed, result.log()
    describe = result.step("Describe the release")
    for name in ("archive-key", "archive-url", "release-key", "release-url", "index-key"):
        assert describe.outputs[name] == result.outputs[name], name
        assert f"| {name} | {result.outputs[name]} |" in describe.summary, describe.summary
    assert Path(describe.outputs["archive-url"]).read_bytes() == release.archive_path.read_bytes()


def test_publish_action_signs_a_signed_store_with_the_key_inputs(harness: Harness) -> None:
    """#34: to a store with signed metadata, the action refuses without its key inputs (nothing uploaded) and,
    given them (the PEM text a workflow passes from secrets), publish signs the release."""
    needs_command("publish")
    release = write_release(harness.workspace / "dist")
    store, keys = harness.runner_temp / "store", harness.runner_temp / "keys"
    init_store(LocalStore(store), generate_keys(keys), [])
    inputs = {"release": str(release.manifest_path), "to": str(store)}
    refused = harness.run(ACTIONS / "publish", inputs)
    assert refused.failed and "SCROLLCASE_TUF_TARGETS_KEY" in refused.log(), refused.log()
    assert not (store / release.manifest.keys.archive).exists()
    pems = {f"{role}-key": (keys / f"{role}.pem").read_text() for role in ("targets", "snapshot", "timestamp")}
    result = harness.run(ACTIONS / "publish", inputs | pems)
    assert not result.failed, result.log()
    published = json.loads(Path(result.outputs["result-json"]).read_text(encoding="utf-8"))
    assert published["storeSigned"] and published["signedMetadata"][-1] == "tuf/timestamp.json"


def test_report_step_of_parity_turns_junit_into_annotations(harness: Harness) -> None:
    """The report step on a given JUnit (the parity step fails first: no parity block): 15 failures give 10 error
    annotations, one counting notice, a summary table and the outputs."""
    junit = make_junit(harness, 15)
    result = harness.run(ACTIONS / "parity", {"target": "tiny-mlp-linux-x86_64-cpu", "junit": str(junit)})
    report = result.step("Report results")
    assert report.status == "success", result.log()
    errors = [a for a in report.stdout.splitlines() if a.startswith("::error ")]
    assert len(errors) == 10 and errors[0].startswith(
        "::error file=recipes/tiny-mlp-linux-x86_64-cpu/recipe.json,line=1,title=scrollcase parity tiny-mlp"
    )
    notices = [a for a in report.stdout.splitlines() if a.startswith("::notice")]
    assert len(notices) == 1 and notices[0].startswith("::notice title=More findings::5 more finding(s)")
    assert "**1 passed, 15 failed, 0 skipped** of 16" in report.summary
    assert result.outputs["failed"] == "15" and result.outputs["conclusion"] == "failure"
    assert result.outputs["junit"] == str(junit)
    # The parity step itself ran `scrollcase parity` on the generated recipe, which has no parity block:
    # it fails with the command's JSON error, teed to result-json, and leaves the given JUnit alone.
    check = result.step("Check parity")
    assert check.status == "failure"
    error = json.loads(check.stdout)
    assert (error["error"], error["exitCode"]) == ("RecipeError", 3)
    assert error["message"] == "recipes/tiny-mlp-linux-x86_64-cpu/recipe.json has no parity block"
    assert check.outputs["label"] == "tiny-mlp-linux-x86_64-cpu" and check.outputs["junit"] == str(junit)
    assert json.loads(Path(check.outputs["result-json"]).read_text(encoding="utf-8")) == error


@pytest.fixture(scope="module")
def demo(demo_workspace: Path) -> Path:
    for command in ("demo", "build", "verify", "publish"):
        needs_command(command)
    return demo_workspace


def test_build_verify_publish_actions_end_to_end(demo: Path, tmp_path: Path) -> None:
    """The real chain on the offline demo recipe: `scrollcase demo` makes the channel, recipe and lock;
    then the build, verify and publish actions run as a release job would, outputs feeding inputs."""
    workspace = tmp_path / "workspace"
    shutil.copytree(demo, workspace, ignore=shutil.ignore_patterns(".scrollcase"))  # the lock names demo's channel
    (recipe_id,) = [p.name for p in (workspace / "recipes").iterdir()]
    temp = tmp_path / "runner-temp"
    temp.mkdir()
    scrollcase_venv(temp)
    harness = Harness(workspace=workspace, runner_temp=temp, uses_outputs=standard_uses())

    build = harness.run(ACTIONS / "build", {"recipe": recipe_id, "out": "dist"})
    assert not build.failed, build.log()
    release = Path(build.outputs["release"])
    archive = Path(build.outputs["archive"])
    assert release.is_absolute() and release.is_file() and archive.is_file()
    assert release.parent == workspace / "dist"
    assert len(build.outputs["sha256"]) == 64 and build.outputs["self-test"] == "passed"
    assert build.outputs["target-id"] in recipe_id and build.outputs["failed"] == "0"
    assert Path(build.outputs["junit"]).is_file()
    assert json.loads(Path(build.outputs["result-json"]).read_text(encoding="utf-8"))
    assert "passed, 0 failed" in build.summary and build.annotations == []

    verify = harness.run(ACTIONS / "verify", {"release": build.outputs["release"]})
    assert not verify.failed, verify.log()
    assert verify.outputs["conclusion"] == "success" and Path(verify.outputs["junit"]).is_file()

    store = tmp_path / "store"
    publish = harness.run(ACTIONS / "publish", {"release": build.outputs["release"], "to": str(store)})
    assert not publish.failed, publish.log()
    assert (store / publish.outputs["archive-key"]).read_bytes() == archive.read_bytes()
    assert (store / publish.outputs["release-key"]).is_file()
    assert publish.outputs["sha256"] == build.outputs["sha256"]
    again = harness.run(ACTIONS / "publish", {"release": build.outputs["release"], "to": str(store)})
    assert not again.failed, again.log()  # identical bytes: a no-op, not a conflict


@pytest.fixture(scope="module")
def failed_build(demo: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[ActionResult, Path]:
    """The build action on the demo recipe with a pythonCode that fails in the box's interpreter."""
    workspace = tmp_path_factory.mktemp("failed-build") / "workspace"
    shutil.copytree(demo, workspace, ignore=shutil.ignore_patterns(".scrollcase"))
    (recipe_dir,) = list((workspace / "recipes").iterdir())
    recipe = json.loads((recipe_dir / "recipe.json").read_text(encoding="utf-8"))
    recipe["selfTest"]["pythonCode"] = "raise SystemExit('the weights do not load')"
    (recipe_dir / "recipe.json").write_text(json.dumps(recipe, indent=2) + "\n", encoding="utf-8")
    temp = workspace.parent / "runner-temp"
    temp.mkdir()
    scrollcase_venv(temp)
    harness = Harness(workspace=workspace, runner_temp=temp, uses_outputs=standard_uses())
    build = harness.run(ACTIONS / "build", {"recipe": recipe_dir.name, "out": "dist"})
    assert build.step("Build the box").status == "failure", build.log()
    return build, recipe_dir


def test_failed_self_test_sets_the_self_test_output_to_failed(failed_build: tuple[ActionResult, Path]) -> None:
    """Defect 4: a failing self-test skipped "Expose the release", so `self-test` (and everything else) was
    empty although the docs promise passed / failed / not run."""
    build, _ = failed_build
    assert build.outputs["self-test"] == "failed", build.log()
    assert build.outputs["failed"] == "1" and build.outputs["release"] == "" and build.outputs["archive"] == ""


def test_failed_self_test_is_one_error_annotation(failed_build: tuple[ActionResult, Path]) -> None:
    """Defect 5: the CLI annotated the SelfTestError and the Report step annotated the same JUnit case.  Now
    the one failed check is one error annotation, at the recipe's pythonCode line."""
    build, recipe_dir = failed_build
    errors = [a for a in build.annotations if a.startswith("::error")]
    assert len(errors) == 1, build.log()
    line = next(
        n for n, text in enumerate((recipe_dir / "recipe.json").read_text().splitlines(), 1) if '"pythonCode"' in text
    )
    assert errors[0].startswith(f"::error file=recipes/{recipe_dir.name}/recipe.json,line={line},"), errors
    assert "the weights do not load" in errors[0]


def test_build_that_fails_before_its_self_test_says_not_run(harness: Harness) -> None:
    """Defect 4, the other case: no lock, so no self-test ran; the CLI's own error is the one annotation."""
    result = harness.run(ACTIONS / "build", {"recipe": "tiny-mlp-linux-x86_64-cpu"})
    assert result.step("Build the box").status == "failure"
    assert result.outputs["self-test"] == "not run", result.log()
    errors = [a for a in result.annotations if a.startswith("::error")]
    assert len(errors) == 1 and "recipes/tiny-mlp-linux-x86_64-cpu" in errors[0], result.log()


def test_annotations_name_files_from_the_repository_root(harness: Harness) -> None:
    """Defect 3: with `working-directory`, annotation paths were relative to that folder and GitHub attached
    them to nothing.  CLI errors and JUnit cases alike now name files from the repository root."""
    sub = harness.workspace / "boxes"
    sub.mkdir()
    (harness.workspace / "recipes").rename(sub / "recipes")
    recipe = sub / "recipes" / "tiny-mlp-linux-x86_64-cpu" / "recipe.json"
    data = json.loads(recipe.read_text())
    data["target"]["accelerator"] = "gpu"
    recipe.write_text(json.dumps(data))
    matrix = harness.run(ACTIONS / "matrix", {"working-directory": "boxes"})
    assert matrix.step("Compute the matrix").status == "failure", matrix.log()
    assert any(
        a.startswith("::error file=boxes/recipes/tiny-mlp-linux-x86_64-cpu/recipe.json") for a in matrix.annotations
    ), matrix.log()

    junit = make_junit(harness, 1)  # a case with file=recipes/tiny-mlp-linux-x86_64-cpu/recipe.json
    parity = harness.run(
        ACTIONS / "parity", {"target": "tiny-mlp-linux-x86_64-cpu", "junit": str(junit), "working-directory": "boxes"}
    )
    errors = [a for a in parity.step("Report results").stdout.splitlines() if a.startswith("::error ")]
    assert errors and errors[0].startswith("::error file=boxes/recipes/tiny-mlp-linux-x86_64-cpu/recipe.json,"), (
        parity.log()
    )


def test_build_action_carries_the_build_caches_only_when_asked(harness: Harness) -> None:
    """build-cache: true hands actions/cache the recipe's cache folders and a key of its pixi.lock (here the
    build itself fails: the generated recipe has no real lock); false, the default, restores nothing;
    anything else is refused before the build."""
    needs_command("build")
    recipe = "tiny-mlp-linux-x86_64-cuda12.4"
    cached = harness.run(ACTIONS / "build", {"recipe": recipe, "build-cache": "true"})
    restore = cached.step("Restore the build caches")
    assert restore.status == "success", cached.log()
    located = cached.step("Locate the build caches").outputs
    assert restore.with_ == {"path": located["path"], "key": located["key"], "restore-keys": located["restore-keys"]}
    assert located["key"].startswith(f"scrollcase-build-v1-Linux-X64-{recipe}-")
    paths = located["path"].splitlines()
    assert str((harness.workspace / ".scrollcase" / "cache" / "pkgs").resolve()) in paths and len(paths) == 5
    plain = harness.run(ACTIONS / "build", {"recipe": recipe})
    assert plain.step("Restore the build caches").status == "skipped"
    assert plain.step("Locate the build caches").outputs == {}
    wrong = harness.run(ACTIONS / "build", {"recipe": recipe, "build-cache": "yes"})
    assert wrong.step("Locate the build caches").status == "failure"
    assert wrong.step("Build the box").status == "skipped"
    assert any("build-cache is 'yes'; write true or false" in a for a in wrong.annotations), wrong.log()
