"""``scrollcase verify RELEASE.json``: check size/sha256, unpack into a temp folder, check the layout,
optionally re-run the self-test with the box's own interpreter; with ``--gpu-proof BUNDLE`` first check the
release's signed GPU proof offline (trust/bundle.py), with ``--gpu-proof-predicate FILE`` write the predicate the
release workflow signs.  ``scrollcase verify --installed DEST``:
report every file of an installed box added, removed or changed (content or mode) since install, and a box
moved away from where it was installed (exit 8 when any)."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from scrollcase.commands import CommandArgs, SubParsers, add_command, fail_after_result, handler
from scrollcase.console import Console
from scrollcase.errors import IntegrityError, UsageError, describe_path
from scrollcase.io.pathcheck import require_file_path

if TYPE_CHECKING:
    from scrollcase.format.release import ReleaseManifest
    from scrollcase.trust.bundle import VerifiedProof

NAME = "verify"
HELP = "verify a built release (archive digest, layout, self-test) or an installed box (--installed)"
DESCRIPTION = (
    "Check the archive's size and sha256 against the release manifest before "
    "extracting, extract safely into a fresh temporary folder, check box.json "
    "and the interpreter, and with --self-test re-run the self-test with the "
    "box's own interpreter.  The temporary folder is removed afterwards.  "
    "With --installed DEST instead: hash every file of the box installed in DEST and report each one "
    "added, removed or changed (content or mode: an executable, setuid, setgid or sticky bit) since install, "
    "and a box moved away from the folder it was installed in (exit code 8 when any is).  "
    "With --gpu-proof BUNDLE --sigstore-root TRUSTED_ROOT.json and --signer-workflow (or --cert-identity): "
    "first check the release's signed GPU proof offline, before anything is unpacked: signed by that identity "
    "under the trusted root, about this archive's sha256, and proving what the manifest says (exit code 13 "
    "when not).  With --gpu-proof-predicate FILE: after the checks pass, write the GPU proof's in-toto "
    "predicate for actions/attest (docs/trust.md#signed-gpu-proof)."
)


@dataclass(frozen=True)
class VerifyArgs(CommandArgs):
    release: Path | None
    installed: Path | None
    self_test: bool
    junit: Path | None
    gpu_proof: Path | None
    sigstore_root: Path | None
    cert_identity: str | None
    signer_workflow: str | None
    cert_oidc_issuer: str | None
    gpu_proof_predicate: Path | None


def register(sub: SubParsers, common: argparse.ArgumentParser) -> None:
    p = add_command(sub, common, NAME, HELP, DESCRIPTION)
    p.add_argument("release", type=Path, nargs="?", help="the .release.json written by `scrollcase build`")
    p.add_argument(
        "--installed", type=Path, default=None, metavar="DEST", help="verify the box installed in DEST instead"
    )
    p.add_argument("--self-test", action="store_true", help="re-run the recipe's self-test in the unpacked box")
    p.add_argument("--junit", type=Path, default=None, help="write the self-test as JUnit XML to PATH")
    add_gpu_proof_options(p)
    p.set_defaults(handler=handler(VerifyArgs, run))


def add_gpu_proof_options(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("signed GPU proof (docs/trust.md#signed-gpu-proof)")
    g.add_argument("--gpu-proof", type=Path, default=None, metavar="BUNDLE", help="check this Sigstore bundle first")
    g.add_argument(
        "--sigstore-root", type=Path, default=None, metavar="TRUSTED_ROOT", help="the Sigstore trusted_root.json"
    )
    g.add_argument("--cert-identity", default=None, help="the one certificate identity (SAN) that may sign")
    g.add_argument(
        "--signer-workflow",
        default=None,
        metavar="OWNER/REPO/.github/workflows/FILE",
        help="the workflow that may sign, at any ref (as gh attestation verify --signer-workflow)",
    )
    g.add_argument(
        "--cert-oidc-issuer", default=None, metavar="URL", help="the signer's OIDC issuer (default: GitHub Actions')"
    )
    g.add_argument(
        "--gpu-proof-predicate", type=Path, default=None, metavar="FILE", help="write the GPU proof's predicate"
    )


def run(args: VerifyArgs, console: Console) -> int:
    if (args.release is None) == (args.installed is None):
        raise UsageError(
            "verify needs either RELEASE.json or --installed DEST (one of them)",
            fix="`scrollcase verify dist/BOX.release.json` or `scrollcase verify --installed DEST`",
        )
    if args.installed is not None:
        if args.gpu_proof is not None or args.gpu_proof_predicate is not None:
            raise UsageError(
                "--gpu-proof and --gpu-proof-predicate are about a release, not an installed box",
                fix="`scrollcase verify BOX.release.json --gpu-proof BUNDLE ...`",
            )
        return run_installed(args.installed, console)
    assert args.release is not None
    from scrollcase.build.verify import verify_release

    for path, option in ((args.junit, "--junit"), (args.gpu_proof_predicate, "--gpu-proof-predicate")):
        if path is not None:
            require_file_path(path, option)
    proof = run_gpu_proof(args, args.release, console) if args.gpu_proof is not None else None
    console.progress(f"verifying {args.release}")
    report = verify_release(args.release, self_test=args.self_test, junit=args.junit)
    lines = [f"ok: {report.archive.name}"] + [f"  ok  {check}" for check in report.layout_checks]
    if report.self_test is not None:
        lines += [f"  ok  self-test: {c.name} ({c.durationSeconds:.2f}s)" for c in report.self_test.checks]
    result = report.to_json()
    if proof is not None:
        result["gpuProof"] = proof.to_json()
        lines.append(f"  ok  GPU proof: signed by {proof.signer}, {proof.to_json()['gpu'] or 'no GPU evidence'}")
    if args.gpu_proof_predicate is not None:
        result["gpuProofPredicate"] = write_predicate(report.manifest, args.gpu_proof_predicate)
        lines.append(f"  wrote the GPU proof's predicate to {result['gpuProofPredicate']}")
    console.result(result, "\n".join(lines))
    return 0


def run_gpu_proof(args: VerifyArgs, release: Path, console: Console) -> VerifiedProof:
    from scrollcase.trust.bundle import GITHUB_ISSUER, verify_gpu_proof

    if args.sigstore_root is None or (args.cert_identity is None) == (args.signer_workflow is None):
        raise UsageError(
            "--gpu-proof needs --sigstore-root and one of --signer-workflow or --cert-identity",
            fix="e.g. --sigstore-root trusted_root.json --signer-workflow OWNER/REPO/.github/workflows/release.yml "
            "(`gh attestation trusted-root` prints the public-good Sigstore trusted root)",
        )
    console.progress(f"checking the GPU proof {args.gpu_proof} offline")
    assert args.gpu_proof is not None
    return verify_gpu_proof(
        release,
        args.gpu_proof,
        args.sigstore_root,
        identity=args.cert_identity,
        workflow=args.signer_workflow,
        issuer=args.cert_oidc_issuer or GITHUB_ISSUER,
    )


def write_predicate(manifest: ReleaseManifest, path: Path) -> str:
    from scrollcase.io.files import write_atomic
    from scrollcase.trust.proof import dump_predicate, predicate_of

    write_atomic(path, dump_predicate(predicate_of(manifest)))
    return describe_path(path)


def run_installed(dest: Path, console: Console) -> int:
    from scrollcase.format.receipt import verify_installed

    console.progress(f"hashing the box installed in {dest}")
    report = verify_installed(dest)
    head = f"{report.box.boxId} {report.box.version} {report.box.targetId} in {dest}: {report.checked} entries"
    unchecked = "" if report.modes_checked else " (its receipt records no modes: not checked)"
    if report.passed:
        console.result(report.to_json(), f"ok: {head}, none changed since install{unchecked}")
        return 0
    lines = [
        f"{c.change:<8} {c.path}"
        + (f" ({c.expected} -> {c.found})" if c.change == "mode" else "")
        + (f" (a shared file: changed in {', '.join(c.sharedWith)})" if c.sharedWith else "")
        for c in report.changes
    ]
    moved = [f"moved    installed in {report.installed_at}, now in {dest}"] if report.moved else []
    summary = f"{head}, {len(report.changes)} changed since install{unchecked}" + (", moved" if report.moved else "")
    console.result(report.to_json(), "\n".join([f"{summary}:", *moved, *lines]))
    fail_after_result(console, installed_error(len(report.changes), report.moved, dest, report.installed_at))


def installed_error(changed: int, moved: bool, dest: Path, installed_at: str) -> IntegrityError:
    """The one error of a failed ``verify --installed``: the files changed, and the box moved, with the fix."""
    if not moved:
        return IntegrityError(
            f"{changed} file(s) of the box in {dest} changed since install",
            fix="reinstall the box (or restore those files from its archive)",
        )
    also = f"; {changed} file(s) changed since install" if changed else ""
    return IntegrityError(
        f"the box in {dest} was installed in {installed_at}: its relocated files still name that folder{also}",
        fix=f"run `scrollcase unpack` (or `scrollcase install`) again into {dest}, or move it back to {installed_at}",
    )
