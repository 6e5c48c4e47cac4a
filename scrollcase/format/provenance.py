"""Where a release was built, when GitHub Actions built it: the release manifest's ``provenance``.

Recorded only on GitHub Actions (``GITHUB_ACTIONS=true`` and all four variables set), so a build
anywhere else writes exactly the bytes it always did.  It names the run whose artifact attestation
(``actions/attest-build-provenance`` in release.yml) signs the archive, manifest and SBOM; the record
itself is a pointer, not a proof — ``gh attestation verify`` is the proof (docs/trust.md).
"""

from __future__ import annotations

from collections.abc import Mapping

from pydantic import BaseModel, ConfigDict


class BuildProvenance(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    repository: str  # owner/name (GITHUB_REPOSITORY)
    ref: str  # refs/tags/v1.2.0 (GITHUB_REF)
    commit: str  # the full commit sha (GITHUB_SHA)
    runId: str  # GITHUB_RUN_ID: the same across re-run attempts, so a re-run rebuilds the same manifest


_VARIABLES = {"repository": "GITHUB_REPOSITORY", "ref": "GITHUB_REF", "commit": "GITHUB_SHA", "runId": "GITHUB_RUN_ID"}


def provenance_from_env(env: Mapping[str, str]) -> BuildProvenance | None:
    """The build's repository, ref, commit and run on GitHub Actions; None anywhere else."""
    if env.get("GITHUB_ACTIONS") != "true":
        return None
    values = {field: env.get(name, "") for field, name in _VARIABLES.items()}
    if not all(values.values()):
        return None
    return BuildProvenance(**values)


def describe_provenance(provenance: BuildProvenance | None) -> str:
    """One line naming where a release was built, for messages: its repository, ref, commit and run."""
    if provenance is None:
        return "a build outside GitHub Actions (no provenance)"
    return f"{provenance.repository} {provenance.ref} at {provenance.commit[:12]} (run {provenance.runId})"
