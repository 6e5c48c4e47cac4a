"""``scrollcase publish RELEASE.json``: upload a built box to a directory or an S3-compatible bucket."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from scrollcase.commands import CommandArgs, SubParsers, add_command, handler
from scrollcase.console import Console
from scrollcase.errors import IntegrityError, Problem, UsageError, describe_path
from scrollcase.format.release import load_release
from scrollcase.github import report
from scrollcase.store.base import Store
from scrollcase.store.factory import DEFAULT_STORE, STORE_ENV, object_key, open_store
from scrollcase.store.publish import PublishResult, publish, size_note
from scrollcase.store.publishplan import PublishPlan, Upload
from scrollcase.trust.keys import ENV_VARS, ONLINE_ROLES, RoleKeys, load_keys

NAME = "publish"
HELP = "publish a release to a directory or S3 bucket"

DESCRIPTION = """\
Publish one release (archive, .sha256 sidecar, release manifest) under
boxes/<boxId>/<version>/<targetId>/ and add it to boxes/<boxId>/index.json.
The archive's size and sha256 are checked against the manifest before anything is
uploaded; the archive goes up before the manifest; a key that already holds different
bytes is never overwritten (ConflictError); republishing identical bytes uploads nothing.
S3 credentials come from the standard AWS chain (environment, profile, OIDC web identity).
A store with signed metadata (tuf/timestamp.json, see scrollcase trust) gets the release's
objects and index signed too, with the online keys from --keys DIR or the environment
(SCROLLCASE_TUF_TARGETS_KEY, SCROLLCASE_TUF_SNAPSHOT_KEY, SCROLLCASE_TUF_TIMESTAMP_KEY);
without them publish refuses before it uploads anything (exit 13).
"""


@dataclass(frozen=True)
class PublishArgs(CommandArgs):
    release: Path
    to: str | None
    archive: Path | None
    endpoint_url: str | None
    dry_run: bool
    keys: Path | None


def register(sub: SubParsers, common: argparse.ArgumentParser) -> None:
    p = add_command(sub, common, NAME, HELP, DESCRIPTION, raw=True)
    p.add_argument("release", type=Path, metavar="RELEASE.json", help="the release manifest written by build")
    p.add_argument(
        "--to",
        metavar="STORE",
        default=None,
        help=f"s3://bucket/prefix or a directory (default: ${STORE_ENV} or {DEFAULT_STORE})",
    )
    p.add_argument(
        "--archive",
        type=Path,
        default=None,
        help="the archive (default: the manifest's archive name beside RELEASE.json)",
    )
    p.add_argument(
        "--endpoint-url",
        default=None,
        help="S3-compatible endpoint such as MinIO or R2 (default: AWS, or $AWS_ENDPOINT_URL_S3)",
    )
    p.add_argument("--dry-run", action="store_true", help="print the plan; write nothing")
    p.add_argument(
        "--keys",
        type=Path,
        metavar="DIR",
        default=None,
        help="folder with the online signing keys targets.pem, snapshot.pem, timestamp.pem, for a store with "
        f"signed metadata (default: ${', $'.join(ENV_VARS.values())})",
    )
    p.set_defaults(handler=handler(PublishArgs, run))


def run(args: PublishArgs, console: Console) -> int:
    manifest_file = describe_path(args.release) or str(args.release)
    manifest = load_release(args.release)
    archive = args.archive or args.release.with_name(manifest.archive.name)
    if args.archive is None and not archive.is_file():
        raise IntegrityError(
            f"{archive} (named by {manifest_file}) does not exist",
            fix="keep the archive beside its release manifest, or pass --archive PATH",
        )
    store = open_store(args.to, args.endpoint_url)
    result = publish(
        store,
        manifest,
        archive,
        dry_run=args.dry_run,
        manifest_file=manifest_file,
        progress=_progress_before_index(console),
        meter=console.meter,
        sbom_folder=args.release.parent,
        keys=online_keys(args.keys),
    )
    if not result.dry_run:
        index = store.url_for(result.plan.index_key)
        console.progress(f"updated {index}" if result.index_written else f"{index} already lists this release")
    env = report.RunnerEnv.from_environ()
    report.set_outputs(publish_outputs(result, store), env)
    report.write_summary(report.render_summary([summary_table(result, store)], report.summary_room(env)), env)
    notice = result.plan.already_published_notice()
    if notice is not None and env.in_actions:
        # A tag that rebuilt an unchanged recipe: green, and the run's page says why nothing was published.
        stream = sys.stderr if console.json_mode else console.stdout
        message = f"{notice}: nothing of this build is published" if not result.dry_run else notice
        report.annotate([Problem(message=message, severity="notice")], stream, title="scrollcase publish")
    console.result(result.to_json(), render(result))
    return 0


def online_keys(folder: Path | None) -> RoleKeys:
    """The online keys from ``--keys DIR`` and the environment (a variable wins over the folder's file)."""
    if folder is not None and not folder.is_dir():
        raise UsageError(f"--keys {describe_path(folder)} is not a folder", fix="pass the folder trust init wrote")
    return load_keys(folder, os.environ, ONLINE_ROLES)


def publish_outputs(result: PublishResult, store: Store) -> dict[str, object]:
    """Step outputs: each object's full key (prefix included) and URL, and what this run did."""
    keys = {step.kind: step.key for step in result.plan.uploads} | {"index": result.plan.index_key}
    outputs: dict[str, object] = {}
    for kind in ("archive", "release", "sbom", "index"):
        key = keys.get(kind)
        outputs[f"{kind}-key"] = object_key(store, key) if key else ""
        outputs[f"{kind}-url"] = store.url_for(key) if key else ""
    outputs["store"] = store.url
    outputs["published"] = "dry-run" if result.dry_run else ("true" if result.uploaded else "already")
    outputs["objects"] = [
        {"kind": s.kind, "key": object_key(store, s.key), "status": status(result, s)} for s in result.plan.uploads
    ]
    return outputs


def status(result: PublishResult, step: Upload) -> str:
    """What this run did with one object: uploaded, reused (bytes copied from earlier releases), already there."""
    if step.action == "skip":
        return "would skip: already there" if result.dry_run else "already there"
    verb = "would upload" if result.dry_run else "uploaded"
    if not result.dry_run and step.key not in result.uploaded:
        return "already there (written by a concurrent publisher)"
    if step.bytes_reused:
        reused = "would reuse" if result.dry_run else "reused"
        return f"{reused} {step.bytes_reused} of {step.size} bytes from earlier releases, {verb} the rest"
    return verb


def summary_table(result: PublishResult, store: Store) -> report.SummaryTable:
    plan = result.plan
    rows = [[s.kind, f"`{store.url_for(s.key)}`", status(result, s), str(s.size)] for s in plan.uploads]
    index = (
        ("would update" if plan.index_action == "update" else "already lists this release")
        if result.dry_run
        else ("updated" if result.index_written else "already lists this release")
    )
    rows.append(["index", f"`{store.url_for(plan.index_key)}`", index, ""])
    lead = f"{'dry run: ' if result.dry_run else ''}{result.bytes_line()}"
    if not result.dry_run and not result.uploaded and not result.index_written:
        lead = f"{_nothing_written(plan)}: nothing was written. {lead}"
    return report.SummaryTable(
        title=f"scrollcase publish {plan.release} -> {result.store}",
        columns=["Object", "Location", "Status", "Bytes"],
        rows=rows,
        lead=lead,
    )


def _progress_before_index(console: Console) -> Callable[[str], None]:
    """Progress lines, less the "updating <index>" that publish prints before it knows whether it will.

    Whether the index was written is only known afterwards (``index_written``), so that line is
    printed then, saying which it was.
    """

    def emit(message: str) -> None:
        if not (message.startswith("updating ") and message.endswith("index.json")):
            console.progress(message)

    return emit


def render(result: PublishResult) -> str:
    plan = result.plan
    verb = "would upload" if result.dry_run else "uploaded"
    lines = [f"{'dry run: ' if result.dry_run else ''}release {plan.release} -> {result.store}"]
    for step in plan.uploads:
        if step.action == "upload" and (result.dry_run or step.key in result.uploaded):
            lines.append(f"  {verb:12} {step.key} ({size_note(step)})")
        else:
            reason = step.reason if step.action == "skip" else "written by a concurrent publisher"
            lines.append(f"  {'skip':12} {step.key} ({reason})")
    index_verb = (
        ("would update" if plan.index_action == "update" else "skip")
        if result.dry_run
        else ("updated" if result.index_written else "skip")
    )
    lines.append(f"  {index_verb:12} {plan.index_key}")
    if result.dry_run and result.store_signed:
        lines.append(f"  {'would sign':12} the release and the index (the store has signed metadata)")
    lines.extend(f"  {'signed':12} {key}" for key in result.signed)
    lines.append(f"  {result.bytes_line()}")
    lines.extend(f"  warning: {warning}" for warning in plan.warnings)
    if not result.dry_run and not result.uploaded and not result.index_written:
        lines.append(f"{_nothing_written(plan)}: nothing to do")
    elif plan.kept is not None:
        lines.append(plan.already_published_notice() or "")
    return "\n".join(lines)


def _nothing_written(plan: PublishPlan) -> str:
    """Why a publish wrote nothing: the same bytes were there, or the same archive under another provenance."""
    return plan.already_published_notice() or "already published with identical bytes"
