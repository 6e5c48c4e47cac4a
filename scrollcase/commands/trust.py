"""``scrollcase trust init|timestamp|rotate|status``: a store's signed metadata (TUF), set up and kept fresh."""

from __future__ import annotations

import argparse
import os
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

from scrollcase.commands import CommandArgs, SubParsers, add_command, handler
from scrollcase.console import Console
from scrollcase.errors import TrustError, UsageError, describe_path
from scrollcase.io.files import write_atomic
from scrollcase.store.base import Store
from scrollcase.store.factory import STORE_ENV, open_read_store, open_store
from scrollcase.store.signing import Documents, box_ids, commit_signed, init_store, store_reader, utc_now
from scrollcase.trust.keys import (
    ENV_VARS,
    ONLINE_ROLES,
    ROLES,
    RoleKeys,
    generate_keys,
    key_files,
    load_keys,
    new_private_key,
    private_pem,
    require_keys,
    signer_from_pem,
)
from scrollcase.trust.repository import (
    DEFAULT_EXPIRIES,
    Expiries,
    StoreMetadata,
    describe,
    expiring,
    read_current,
    refresh_timestamp,
    root_key,
    rotate_root,
)

NAME = "trust"
HELP = "set up, re-sign and rotate the keys of a store's signed metadata (TUF)"
ACTIONS = ("init", "timestamp", "rotate", "status")
DESCRIPTION = f"""\
A store's signed metadata (TUF) lets a host check every index, manifest and archive against keys it
ships (install --trusted-root), so a store, mirror or CDN cannot serve repacked, old or mixed files.

init      write the keys (DIR/root.pem offline; targets.pem, snapshot.pem, timestamp.pem online) where
          DIR lacks them, the store's first metadata, and sign every release the store already holds;
          DIR/root.json is the root to ship in the host app.
timestamp re-sign the timestamp (expires in a day) and the snapshot when it is close to expiry, with
          the online keys: run it on a schedule (.github/workflows/trust-timestamp.yml).
rotate    a new root naming --new-key FILE for --role (FILE is generated when absent), signed by the
          current root's keys (--keys DIR) and the new ones; an online role is then re-signed with
          its new key: this is how a lost or leaked timestamp, snapshot or targets key is replaced.
status    each role's version, expiry and keys.

Online keys come from --keys DIR or {", ".join(ENV_VARS.values())} (PEM text, from secrets).
"""


@dataclass(frozen=True)
class TrustArgs(CommandArgs):
    action: str
    store: str | None
    endpoint_url: str | None
    keys: Path | None
    root_threshold: int | None
    role: str | None
    new_key: tuple[Path, ...]
    box: tuple[str, ...]
    root_expires: float
    targets_expires: float
    snapshot_expires: float
    timestamp_expires: float


def register(sub: SubParsers, common: argparse.ArgumentParser) -> None:
    p = add_command(sub, common, NAME, HELP, DESCRIPTION, raw=True)
    p.add_argument("action", choices=ACTIONS, help="what to do")
    p.add_argument(
        "--store", default=None, help=f"the store: a directory or s3://bucket/prefix (default: ${STORE_ENV})"
    )
    p.add_argument(
        "--endpoint-url", default=None, help="S3-compatible endpoint (default: AWS, or $AWS_ENDPOINT_URL_S3)"
    )
    p.add_argument("--keys", type=Path, metavar="DIR", default=None, help="the keys folder (init writes it)")
    p.add_argument(
        "--root-threshold",
        type=int,
        metavar="N",
        default=None,
        help="init: how many root keys must sign a new root (default 1; N root keys are generated); "
        "rotate: the new root's threshold",
    )
    p.add_argument("--role", choices=ROLES, default=None, help="rotate: the role whose key is replaced")
    p.add_argument(
        "--new-key", type=Path, action="append", default=[], metavar="FILE", help="rotate: the role's new key"
    )
    p.add_argument("--box", action="append", default=[], metavar="BOX_ID", help="init: sign only these boxes")
    for role, default in vars(DEFAULT_EXPIRIES).items():
        p.add_argument(
            f"--{role}-expires",
            type=float,
            metavar="DAYS",
            default=default / timedelta(days=1),
            help=f"how long new {role} metadata stays valid (default: {default.days} days)",
        )
    p.set_defaults(handler=handler(TrustArgs, run))


def run(args: TrustArgs, console: Console) -> int:
    check_options(args)
    location = args.store if args.store is not None else os.environ.get(STORE_ENV)
    if location is None:
        raise UsageError("trust needs --store", fix=f"pass --store DIRECTORY|s3://bucket/prefix or set ${STORE_ENV}")
    if args.action == "status":  # reads only: an https:// store (what hosts read) works too
        readable = open_read_store(location, args.endpoint_url)
        data: dict[str, Any] = {"store": readable.url, "action": args.action}
        data |= describe(current(readable, None), utc_now())
        console.result(data, render_status(data))
        return 0
    store = open_store(location, args.endpoint_url)
    store.check()
    data = {"store": store.url, "action": args.action}
    data |= {"init": run_init, "timestamp": run_timestamp, "rotate": run_rotate}[args.action](args, store, console)
    lines = [
        f"{args.action}: {store.url}",
        *(f"  wrote {key}" for key in dict.fromkeys(data["written"])),
        *data.get("notes", []),
    ]
    console.result(data, "\n".join(lines))
    return 0


def check_options(args: TrustArgs) -> None:
    """UsageError for an option the action does not take, or a missing one it needs."""
    wrong = [
        option
        for option, given, actions in (
            ("--role", args.role, ("rotate",)),
            ("--new-key", args.new_key, ("rotate",)),
            ("--box", args.box, ("init",)),
            ("--root-threshold", args.root_threshold, ("init", "rotate")),
        )
        if given and args.action not in actions
    ]
    if wrong:
        raise UsageError(f"trust {args.action} takes no {', '.join(wrong)}", fix="see scrollcase trust --help")
    if args.action == "init" and args.keys is None:
        raise UsageError(
            "trust init needs --keys DIR", fix="name the folder for the keys (kept offline: it holds root.pem)"
        )
    if args.action == "rotate" and (args.role is None or not args.new_key or args.keys is None):
        raise UsageError(
            "trust rotate needs --keys DIR (with the root key), --role and --new-key FILE",
            fix="scrollcase trust rotate --store S --keys DIR --role timestamp --new-key new-timestamp.pem",
        )
    expiries(args)
    if args.root_threshold is not None and args.root_threshold < 1:
        raise UsageError(f"--root-threshold {args.root_threshold} is not a positive number", fix="pass 1 or more")


def expiries(args: TrustArgs) -> Expiries:
    days = {
        "root": args.root_expires,
        "targets": args.targets_expires,
        "snapshot": args.snapshot_expires,
        "timestamp": args.timestamp_expires,
    }
    bad = [f"--{role}-expires {value:g}" for role, value in days.items() if value <= 0]
    if bad:
        raise UsageError(f"{', '.join(bad)}: an expiry is a positive number of days", fix="pass days > 0")
    return Expiries(**{role: timedelta(days=value) for role, value in days.items()})


def current(store: Documents, roles: list[str] | None) -> StoreMetadata:
    found = read_current(store_reader(store), roles)
    if found is None:
        raise TrustError(
            f"{store.url_for('tuf/timestamp.json')} does not exist: this store has no signed metadata",
            fix=f"set it up: scrollcase trust init --store {store.url} --keys DIR",
        )
    return found


def run_init(args: TrustArgs, store: Store, console: Console) -> dict[str, Any]:
    assert args.keys is not None
    threshold = args.root_threshold or 1
    existing = {role: bool(key_files(args.keys, role)) for role in ROLES}
    keys = generate_keys(args.keys, root_keys=threshold)
    boxes = list(args.box) or box_ids(store)
    written = init_store(
        store,
        keys,
        boxes,
        now=utc_now,
        expiries=expiries(args),
        root_threshold=threshold,
        progress=console.progress,
    )
    shipped = write_atomic(args.keys / "root.json", store_bytes(store, root_key(1)))
    made = [role for role, had in existing.items() if not had]
    return {
        "written": list(written),
        "keysGenerated": made,
        "keys": str(args.keys),
        "boxes": boxes,
        "trustedRoot": str(shipped),
        "notes": [
            f"  keys generated in {describe_path(args.keys)}: {', '.join(made) or 'none (all were there)'}",
            f"  signed the releases of: {', '.join(boxes) or 'no box yet'}",
            f"  ship {describe_path(shipped)} with the host app (install --trusted-root); keep root.pem offline; "
            f"put targets.pem, snapshot.pem, timestamp.pem in the secrets {', '.join(ENV_VARS.values())}",
        ],
    }


def store_bytes(store: Store, key: str) -> bytes:
    blob = store.get_bytes(key)
    if blob is None:
        raise TrustError(f"{store.url_for(key)} is missing", fix="run scrollcase trust status")
    return blob.data


def run_timestamp(args: TrustArgs, store: Store, console: Console) -> dict[str, Any]:
    lifetimes = expiries(args)
    current(store, [])  # a store without metadata says so before the keys are asked for
    keys = load_keys(args.keys, os.environ, ONLINE_ROLES)
    require_keys(keys, ["timestamp"], "trust timestamp")
    written = commit_signed(
        store, lambda now: refresh_timestamp(now, keys, utc_now(), lifetimes), None, progress=console.progress
    )
    soon = expiring(current(store, None), utc_now() + lifetimes.targets / 4)
    notes = [
        f"  warning: {role} expires {when.isoformat()}: run trust timestamp with the targets key too "
        f"({ENV_VARS['targets']} or --keys) to re-sign it"
        for role, when in soon.items()
    ]
    for note in notes:
        console.progress(note.strip())
    return {"written": list(written), "expiring": {role: when.isoformat() for role, when in soon.items()}}


def new_signers(path: Path, role: str) -> tuple[RoleKeys, bool]:
    """The new key of ``role`` from ``path`` (written there, 0600, when absent), and whether it was made."""
    made = not path.exists()
    if made:
        write_atomic(path, private_pem(new_private_key()), mode=0o600)
    signer = signer_from_pem(path.read_bytes(), describe_path(path))
    return RoleKeys({role: (signer,)}, {role: describe_path(path)}), made


def run_rotate(args: TrustArgs, store: Store, console: Console) -> dict[str, Any]:
    assert args.keys is not None and args.role is not None
    root_keys = load_keys(args.keys, {}, ["root"])
    require_keys(root_keys, ["root"], "trust rotate (a new root is signed by the current root's keys)")
    replacement = [new_signers(path, args.role) for path in args.new_key]
    signers = [signer for keys, _ in replacement for signer in keys.of(args.role)]
    online = load_keys(args.keys, os.environ, [r for r in ONLINE_ROLES if r != args.role])
    new_keys = online.with_role(args.role, signers, ", ".join(k.source(args.role) for k, _ in replacement))
    needs = {"targets": ONLINE_ROLES, "snapshot": ("snapshot", "timestamp"), "timestamp": ("timestamp",)}
    require_keys(new_keys, needs.get(args.role, ()), f"trust rotate --role {args.role}")
    lifetimes = expiries(args)
    roles: list[str] | None = None if args.role == "targets" else []

    def sign(now: StoreMetadata) -> dict[str, bytes]:
        return rotate_root(
            now, root_keys, new_keys, utc_now(), roles=[args.role or ""], expiries=lifetimes,
            root_threshold=args.root_threshold,
        )  # fmt: skip

    written = commit_signed(store, sign, roles, progress=console.progress)
    newest = next(key for key in written if key.endswith(".root.json"))
    shipped = write_atomic(args.keys / "root.json", store_bytes(store, newest))
    made = [str(path) for path, (_, was_made) in zip(args.new_key, replacement, strict=True) if was_made]
    where = "keep it offline" if args.role == "root" else f"put it in the secret {ENV_VARS.get(args.role, '')}"
    return {
        "written": list(written),
        "role": args.role,
        "newKeys": [str(path) for path in args.new_key],
        "keysGenerated": made,
        "trustedRoot": str(shipped),
        "notes": [
            f"  the {args.role} key is now {', '.join(map(describe_path, args.new_key))}"
            f"{' (generated)' if made else ''}: {where}",
            f"  {describe_path(shipped)} is the newest root: hosts holding an older one update to it; ship it in "
            "new host app builds",
        ],
    }


def render_status(data: dict[str, Any]) -> str:
    lines = [f"signed metadata of {data['store']}"]
    for role in ROLES:
        entry = data[role]
        state = "EXPIRED" if entry["expired"] else "valid"
        lines.append(
            f"  {role:10} version {entry['version']:<4} expires {entry['expires']} ({state}), "
            f"threshold {entry['threshold']} of {len(entry['keyids'])} key(s): "
            + ", ".join(k[:16] for k in entry["keyids"])
        )
    for box, entry in data["boxes"].items():
        expiry = f", expires {entry['expires']}{' (EXPIRED)' if entry['expired'] else ''}" if "expires" in entry else ""
        lines.append(f"  box {box}: {entry['key']}{expiry}, {entry.get('targets', '?')} targets")
    return "\n".join(lines)
