"""Static rules for every composite action and workflow: inputs via env, no ${{ }} in run, shells,
pinned nested actions, outputs that point at real steps."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
ACTION_FILES = sorted([ROOT / "action.yml", *(ROOT / "actions").glob("*/action.yml")])
WORKFLOW_FILES = sorted((ROOT / ".github" / "workflows").glob("*.yml"))
SUB_ACTIONS = {"matrix", "lock-check", "build", "parity", "verify", "publish"}
PINNED = re.compile(r"^[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+(/[^@\s]+)?@[0-9a-f]{40}$")
VERSION_COMMENT = re.compile(r"@[0-9a-f]{40} # v\d+(\.\d+)*$")


def load(path: Path) -> dict[str, Any]:
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    if True in data:  # YAML 1.1 reads the key `on` as a boolean
        data["on"] = data.pop(True)
    return data  # type: ignore[no-any-return]


def action_steps(path: Path) -> list[dict[str, Any]]:
    return load(path)["runs"]["steps"]  # type: ignore[no-any-return]


def workflow_steps(path: Path) -> list[dict[str, Any]]:
    return [s for job in load(path)["jobs"].values() for s in job.get("steps", [])]


def rel(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


def test_every_action_and_workflow_exists() -> None:
    assert {p.parent.name for p in ACTION_FILES if p.parent != ROOT} == SUB_ACTIONS
    assert {p.name for p in WORKFLOW_FILES} >= {"ci.yml", "recipes.yml", "release.yml", "major-tag.yml"}


@pytest.mark.parametrize("path", ACTION_FILES, ids=rel)
def test_every_input_is_forwarded_through_env(path: Path) -> None:
    """Scripts get inputs only as environment variables; a nested action (setup-python) gets its own
    input through `with:`, which no shell ever expands."""
    data = load(path)
    steps = data["runs"]["steps"]
    env_values = " ".join(str(v) for s in steps if "run" in s for v in (s.get("env") or {}).values())
    with_values = " ".join(str(v) for s in steps if "uses" in s for v in (s.get("with") or {}).values())
    for name in data["inputs"]:
        ref = f"${{{{ inputs.{name} }}}}"
        assert ref in env_values or ref in with_values, f"{rel(path)}: input {name!r} never reaches env:"
        assert all(ref not in str(s.get("run", "")) for s in steps), f"{rel(path)}: {name} expanded in run:"
    assert data["runs"]["using"] == "composite"


@pytest.mark.parametrize("path", ACTION_FILES + WORKFLOW_FILES, ids=rel)
def test_run_steps_have_a_shell_and_no_expressions(path: Path) -> None:
    steps = action_steps(path) if path in ACTION_FILES else workflow_steps(path)
    for step in (s for s in steps if "run" in s):
        where = f"{rel(path)}: step {step.get('name')!r}"
        assert "${{" not in step["run"], f"{where} expands an expression in run:"
        assert step.get("shell") == "bash", f"{where} has no shell: bash"


@pytest.mark.parametrize("path", ACTION_FILES + WORKFLOW_FILES, ids=rel)
def test_nested_actions_are_pinned_by_full_sha_with_version_comment(path: Path) -> None:
    data = load(path)
    steps = action_steps(path) if path in ACTION_FILES else workflow_steps(path)
    uses = [s["uses"] for s in steps if "uses" in s]
    if path in WORKFLOW_FILES:
        uses += [j["uses"] for j in data["jobs"].values() if "uses" in j]
    lines = path.read_text(encoding="utf-8").splitlines()
    for ref in uses:
        if ref.startswith("./"):
            continue
        assert PINNED.match(ref), f"{rel(path)}: {ref} is not pinned by a 40-hex SHA"
        line = next(x for x in lines if ref in x)
        assert VERSION_COMMENT.search(line), f"{rel(path)}: {ref} has no `# vX.Y.Z` comment"


@pytest.mark.parametrize("path", ACTION_FILES, ids=rel)
def test_setup_python_leaves_the_users_python_alone(path: Path) -> None:
    setup = action_steps(path)[0]
    assert setup["uses"].startswith("actions/setup-python@")
    assert setup["with"]["update-environment"] is False


def test_setup_steps_are_identical_in_every_action() -> None:
    """Four short steps, the same everywhere; what they do is in one script, actions/setup_scrollcase.py."""
    heads = {rel(p): action_steps(p)[:4] for p in ACTION_FILES}
    first = next(iter(heads.values()))
    assert all(head == first for head in heads.values())
    python, locate, cache, install = first
    assert python["uses"].startswith("actions/setup-python@") and locate["id"] == "venv"
    assert cache["uses"].startswith("actions/cache@") and cache["if"] == "steps.venv.outputs.cache == 'true'"
    assert cache["with"] == {"path": "${{ steps.venv.outputs.venv }}", "key": "${{ steps.venv.outputs.key }}"}
    for step, command in ((locate, "locate"), (install, "install")):
        assert "actions/setup_scrollcase.py" in step["run"] and step["run"].rstrip().endswith(command)
        assert len(step["run"].strip().splitlines()) == 1  # the logic is in the script, not the YAML
    assert (ROOT / "actions" / "setup_scrollcase.py").is_file()
    for path in ACTION_FILES:
        assert "generated" not in path.read_text(encoding="utf-8"), rel(path)


@pytest.mark.parametrize("path", ACTION_FILES, ids=rel)
def test_the_shared_setup_stays_a_few_lines_of_yaml(path: Path) -> None:
    """Each file carried its own 58-line copy of the setup once; now the four steps are under 30 lines
    and what they do is in actions/setup_scrollcase.py (inputs may grow; the copied part may not)."""
    lines = path.read_text(encoding="utf-8").splitlines()
    start = lines.index("  steps:")
    steps = [n for n, line in enumerate(lines) if n > start and line.startswith("    - name:")]
    assert len(steps) > 4 and steps[4] - start <= 30, rel(path)


@pytest.mark.parametrize("path", ACTION_FILES, ids=rel)
def test_outputs_point_at_existing_steps(path: Path) -> None:
    data = load(path)
    ids = {s.get("id") for s in data["runs"]["steps"]}
    for name, output in (data.get("outputs") or {}).items():
        found = re.fullmatch(r"\$\{\{ (.+) \}\}", output["value"])
        refs = re.findall(r"steps\.([\w-]+)\.outputs\.[\w-]+", found.group(1)) if found else []
        assert refs and all(ref in ids for ref in refs), f"{rel(path)}: output {name} -> {output['value']}"


def test_build_action_exposes_the_promised_outputs() -> None:
    outputs = load(ROOT / "actions" / "build" / "action.yml")["outputs"]
    assert {"archive", "release", "sha256", "junit", "result-json"} <= set(outputs)
    assert {"matrix", "empty"} <= set(load(ROOT / "actions" / "matrix" / "action.yml")["outputs"])


def test_workflows_start_with_no_permissions_and_grant_per_job() -> None:
    for path in WORKFLOW_FILES:
        data = load(path)
        assert data["permissions"] == {}, rel(path)
        for name, job in data["jobs"].items():
            assert "permissions" in job, f"{rel(path)}: job {name} does not declare permissions"


def test_checkouts_do_not_persist_credentials() -> None:
    for path in WORKFLOW_FILES:
        for step in workflow_steps(path):
            if step.get("uses", "").startswith("actions/checkout@"):
                assert step["with"]["persist-credentials"] is False, rel(path)


def test_recipes_workflow_keeps_forks_off_self_hosted_runners() -> None:
    data = load(ROOT / ".github" / "workflows" / "recipes.yml")
    assert "pull_request_target" not in data["on"]
    matrix_step = next(s for s in data["jobs"]["matrix"]["steps"] if s.get("id") == "matrix")
    assert "head.repo.fork" in matrix_step["with"]["hosted-only"]
    build = data["jobs"]["build"]
    assert build["runs-on"] == "${{ matrix.runs-on }}"
    guard = build["steps"][0]
    assert "head.repo.fork" in guard["if"] and "exit 1" in guard["run"]
    aggregator = data["jobs"]["recipes-ok"]
    assert aggregator["if"] == "always()" and set(aggregator["needs"]) == set(data["jobs"]) - {"recipes-ok"}
    parity = next(s for s in build["steps"] if s.get("id") == "parity")
    assert parity["if"] == "matrix.parity"
    uploads = [s for s in build["steps"] if s.get("uses", "").startswith("actions/upload-artifact@")]
    assert uploads and uploads[0]["if"] == "always()"


def test_release_workflow_publishes_from_a_protected_environment_with_oidc() -> None:
    data = load(ROOT / ".github" / "workflows" / "release.yml")
    publish = data["jobs"]["publish"]
    assert publish["environment"] == "release"
    assert publish["permissions"] == {"contents": "read", "id-token": "write"}
    aws = "aws-actions/configure-aws-credentials@"
    assert any(s.get("uses", "").startswith(aws) for s in publish["steps"])
    for name, job in data["jobs"].items():
        if name not in ("publish", "attest"):
            assert "id-token" not in job["permissions"], name
        if name != "attest":
            assert "attestations" not in job["permissions"], name


def test_release_workflow_attests_archive_manifest_and_sbom_before_publishing() -> None:
    data = load(ROOT / ".github" / "workflows" / "release.yml")
    attest = data["jobs"]["attest"]
    assert attest["permissions"] == {"contents": "read", "id-token": "write", "attestations": "write"}
    assert "attest" in data["jobs"]["publish"]["needs"]
    (step,) = [s for s in attest["steps"] if s.get("uses", "").startswith("actions/attest-build-provenance@")]
    assert re.fullmatch(r"actions/attest-build-provenance@[0-9a-f]{40}", step["uses"])  # pinned by full SHA
    subjects = step["with"]["subject-path"].splitlines()
    assert [s.rsplit("}", 1)[1] for s in subjects] == [".tar.zst", ".release.json", ".sbom.json"]
    assert not any(s.get("uses", "").startswith("./actions/") for s in attest["steps"])  # no recipe code runs here
    # No caches on the release path: every scrollcase action gets cache: "false".
    for step in workflow_steps(ROOT / ".github" / "workflows" / "release.yml"):
        if step.get("uses", "").startswith("./actions/"):
            assert step["with"]["cache"] == "false", step["uses"]


def test_release_workflow_signs_the_gpu_proof_beside_the_provenance() -> None:
    """#34: the build job's verify writes the predicate once the release verifies; the attest job signs it with
    actions/attest (pinned by SHA) as a statement about the archive, and keeps the bundle."""
    from scrollcase.trust.proof import PREDICATE_TYPE

    data = load(ROOT / ".github" / "workflows" / "release.yml")
    build = data["jobs"]["build"]
    verify = next(s for s in build["steps"] if s.get("id") == "verify")
    assert verify["with"]["gpu-proof-predicate"] == "true"
    upload = next(s for s in build["steps"] if s.get("uses", "").startswith("actions/upload-artifact@"))
    assert "${{ steps.verify.outputs.gpu-proof-predicate }}" in upload["with"]["path"]
    attest = data["jobs"]["attest"]
    (step,) = [s for s in attest["steps"] if s.get("uses", "").startswith("actions/attest@")]
    assert re.fullmatch(r"actions/attest@[0-9a-f]{40}", step["uses"])
    assert step["with"]["predicate-type"] == PREDICATE_TYPE
    assert step["with"]["subject-path"].endswith("}.tar.zst")
    assert step["with"]["predicate-path"].endswith("}.gpu-proof.json")
    saved = next(s for s in attest["steps"] if s.get("name") == "Keep the GPU proof's bundle")
    assert saved["env"]["BUNDLE"] == "${{ steps.gpu-proof.outputs.bundle-path }}"
    assert saved["env"]["SAVED"].endswith("}.gpu-proof.sigstore.json")
    assert "${{" not in saved["run"]
    run = step_of("verify", "Verify the box")
    assert run["env"]["INPUT_GPU_PROOF_PREDICATE"] == "${{ inputs.gpu-proof-predicate }}"
    assert inputs_of("verify")["gpu-proof-predicate"]["default"] == "false"


# --- issue 30: the actions for someone else's repository ------------------------------------------


def inputs_of(name: str) -> dict[str, Any]:
    path = ROOT / "action.yml" if name == "root" else ROOT / "actions" / name / "action.yml"
    return load(path)["inputs"]  # type: ignore[no-any-return]


def step_of(name: str, step_name: str) -> dict[str, Any]:
    return next(s for s in action_steps(ROOT / "actions" / name / "action.yml") if s.get("name") == step_name)


def test_matrix_affects_all_defaults_to_the_workflows_only() -> None:
    """An adopter's repository: nothing outside recipes/ but the workflows selects every recipe; scrollcase's
    own recipes.yml names its package and actions itself."""
    inputs = inputs_of("matrix")
    assert inputs["affects-all"]["default"] == ".github/workflows/*" and inputs["all-on"]["default"] == ""
    run = step_of("matrix", "Compute the matrix")
    assert run["env"]["INPUT_AFFECTS_ALL"] == "${{ inputs.affects-all }}"
    assert 'args+=(--affects-all "")' in run["run"]  # the input replaces the default, also when empty
    recipes = load(ROOT / ".github" / "workflows" / "recipes.yml")
    step = next(s for s in recipes["jobs"]["matrix"]["steps"] if s.get("id") == "matrix")
    assert {"pyproject.toml", "scrollcase/*", "actions/*"} <= set(step["with"]["affects-all"].split())


@pytest.mark.parametrize("name", ["lock-check", "root"])
def test_channel_overrides_reach_scrollcase_as_its_variable(name: str) -> None:
    assert inputs_of(name)["channel-overrides"]["default"] == ""
    path = ROOT / "action.yml" if name == "root" else ROOT / "actions" / name / "action.yml"
    (step,) = [s for s in action_steps(path) if "INPUT_CHANNEL_OVERRIDES" in (s.get("env") or {})]
    assert step["env"]["INPUT_CHANNEL_OVERRIDES"] == "${{ inputs.channel-overrides }}"
    # only when given: the job's own SCROLLCASE_CHANNEL_OVERRIDES is kept otherwise; newlines become commas
    guard = 'if [ -n "$INPUT_CHANNEL_OVERRIDES" ]; then export SCROLLCASE_CHANNEL_OVERRIDES='
    assert guard + "\"${INPUT_CHANNEL_OVERRIDES//$'\\n'/,}\"; fi" in step["run"]


def test_lock_check_writes_junit_and_reports_it() -> None:
    inputs = inputs_of("lock-check")
    assert {k: inputs[k]["default"] for k in ("junit", "github-token", "check-run-name")} == dict.fromkeys(
        ("junit", "github-token", "check-run-name"), ""
    )
    check = step_of("lock-check", "Check the locks")
    assert '--junit "$junit"' in check["run"] and "junit=%s" in check["run"]
    report = step_of("lock-check", "Report results")
    assert report["if"] == "always() && steps.run.outputs.junit != ''" and "report junit" in report["run"]
    outputs = load(ROOT / "actions" / "lock-check" / "action.yml")["outputs"]
    assert outputs["junit"]["value"] == "${{ steps.run.outputs.junit }}"
    assert outputs["conclusion"]["value"] == "${{ steps.report.outputs.conclusion }}"


def test_build_cache_is_off_by_default_and_pinned() -> None:
    assert inputs_of("build")["build-cache"]["default"] == "false"
    names = [s.get("name") for s in action_steps(ROOT / "actions" / "build" / "action.yml")]
    assert names.index("Restore the build caches") < names.index("Build the box")
    restore = step_of("build", "Restore the build caches")
    assert PINNED.match(restore["uses"]) and restore["uses"].startswith("actions/cache@")
    assert restore["if"] == "steps.caches.outputs.key != ''"
    assert restore["with"] == {
        "path": "${{ steps.caches.outputs.path }}",
        "key": "${{ steps.caches.outputs.key }}",
        "restore-keys": "${{ steps.caches.outputs.restore-keys }}",
    }
    assert "report build-cache" in step_of("build", "Locate the build caches")["run"]
    # scrollcase's own release workflow never restores build caches into a published box
    for step in workflow_steps(ROOT / ".github" / "workflows" / "release.yml"):
        assert (step.get("with") or {}).get("build-cache", "false") == "false", step


def test_publish_outputs_come_from_the_publish_step() -> None:
    """The keys with the store's prefix are known to publish only, not to the manifest (report release)."""
    outputs = load(ROOT / "actions" / "publish" / "action.yml")["outputs"]
    for name in ("archive-key", "release-key", "index-key", "archive-url", "release-url", "published"):
        assert outputs[name]["value"] == f"${{{{ steps.run.outputs.{name} }}}}", name


def test_publish_describes_the_release_with_the_stores_keys() -> None:
    """The step before the upload lists the keys and URLs in the store the action publishes to (its prefix
    included), not the manifest's prefix-less keys: `report release --to` the action's `to`, through env."""
    describe = step_of("publish", "Describe the release")
    assert describe["env"]["INPUT_TO"] == "${{ inputs.to }}"
    assert '"$INPUT_RELEASE" --to "$INPUT_TO"' in describe["run"] and "report release" in describe["run"]


def test_publish_gets_the_online_signing_keys_from_secrets_never_the_root() -> None:
    """A store with signed metadata (#34): the publish action hands its key inputs to scrollcase as the
    SCROLLCASE_TUF_*_KEY variables, and release.yml's publish job fills them from the environment's secrets."""
    publish = step_of("publish", "Publish the box")
    for role in ("targets", "snapshot", "timestamp"):
        assert publish["env"][f"SCROLLCASE_TUF_{role.upper()}_KEY"] == f"${{{{ inputs.{role}-key }}}}"
    (job_step,) = [
        s for s in workflow_steps(ROOT / ".github" / "workflows" / "release.yml") if s.get("id") == "publish"
    ]
    for role in ("targets", "snapshot", "timestamp"):
        assert job_step["with"][f"{role}-key"] == f"${{{{ secrets.SCROLLCASE_TUF_{role.upper()}_KEY }}}}"
    text = (ROOT / ".github" / "workflows" / "release.yml").read_text(encoding="utf-8")
    assert "SCROLLCASE_TUF_ROOT" not in text and "root.pem" not in text


def test_the_timestamp_is_re_signed_on_a_schedule_within_its_expiry() -> None:
    """trust-timestamp.yml runs `scrollcase trust timestamp` at least every day (the timestamp's default
    expiry) with the online keys only (never the root's), from a protected environment."""
    data = load(ROOT / ".github" / "workflows" / "trust-timestamp.yml")
    (cron,) = [entry["cron"] for entry in data["on"]["schedule"]]
    assert cron.split()[1] == "*/6"
    (job,) = data["jobs"].values()
    assert job["environment"] == "release"
    (step,) = [s for s in job["steps"] if "trust timestamp" in s.get("run", "")]
    keys = {name for name in step["env"] if name.startswith("SCROLLCASE_TUF_")}
    assert keys == {"SCROLLCASE_TUF_TIMESTAMP_KEY", "SCROLLCASE_TUF_SNAPSHOT_KEY", "SCROLLCASE_TUF_TARGETS_KEY"}
