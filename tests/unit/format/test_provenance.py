from __future__ import annotations

from scrollcase.format.provenance import BuildProvenance, provenance_from_env

ACTIONS = {
    "GITHUB_ACTIONS": "true",
    "GITHUB_REPOSITORY": "octo/boxes",
    "GITHUB_REF": "refs/tags/release-7",
    "GITHUB_SHA": "f" * 40,
    "GITHUB_RUN_ID": "1234567890",
}


def test_on_github_actions_the_build_records_repository_ref_commit_and_run() -> None:
    assert provenance_from_env(ACTIONS) == BuildProvenance(
        repository="octo/boxes", ref="refs/tags/release-7", commit="f" * 40, runId="1234567890"
    )


def test_anywhere_else_nothing_is_recorded() -> None:
    assert provenance_from_env({}) is None
    assert provenance_from_env({**ACTIONS, "GITHUB_ACTIONS": "false"}) is None  # act without the flag, a shell
    assert provenance_from_env({k: v for k, v in ACTIONS.items() if k != "GITHUB_RUN_ID"}) is None
