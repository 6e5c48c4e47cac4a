"""Mutation testing of the core rooms with cosmic-ray (``pip install -e .[mutation]``).

Each module is mutated in a throwaway copy of the checkout (never in the working tree: an interrupted
run cannot leave a mutant behind) and every mutant is tested with the module's mirrored tests only,
stopping at the first failure.  A fork server imports pytest, numpy, hypothesis and pydantic once and
runs each mutant's tests in a fork of itself (the mutated module is imported fresh there, never from
a ``.pyc``), which is ~3x faster than a fresh interpreter per mutant.  A mutant whose tests run past
3 baseline runs counts as killed (cosmic-ray's rule: a loop is caught).  Mutants inside a function's
annotations are not run where ``from __future__ import annotations`` keeps them strings nothing
evaluates (counted as equivalent).  Prints, per module: mutants, killed, survived, equivalent,
incompetent (the mutant could not be run), the score (killed of the non-equivalent mutants that ran),
the wall time, and each survivor's diff, to be argued as equivalent or killed with a new test.  Run:

    python benchmarks/mutation.py scrollcase/format/paths.py   # one module (~2-15 min on 2 busy cores)
    python benchmarks/mutation.py --list                    # the core rooms and their tests
    python benchmarks/mutation.py                           # every core room: hours on 2 cores
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import datetime
import json
import os
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
COPIED = ("scrollcase", "tests", "actions", "recipes", "docs", "pyproject.toml", "README.md")

# the directory-store tests of test_publish_reuse.py (the S3 ones start servers: each survivor would pay)
_REUSE_DIRECTORY_TESTS = tuple(
    f"tests/integration/test_publish_reuse.py::test_{name}"
    for name in (
        "directory_store_copies_the_unchanged_frames",
        "corrupt_earlier_archive_is_not_copied",
        "missing_earlier_archive_means_a_full_copy",
        "earlier_manifest_the_index_does_not_vouch_for_is_not_used",
    )
)
# 4 CLI processes publishing at once (30 s of a busy machine, paid by every survivor): the threads test beside
# it runs the same publish and lock code concurrently
_NO_PROCESS_PUBLISHERS = (
    "--deselect=tests/integration/test_publish_local.py::test_processes_publishing_different_targets_share_the_index"
)
# module -> the tests that mirror it (and the few others that exercise it for real)
CORE: dict[str, tuple[str, ...]] = {
    "scrollcase/store/base.py": (
        "tests/unit/store/test_base.py",
        "tests/unit/store/test_publish.py",
        "tests/unit/store/test_s3_helpers.py",
    ),
    "scrollcase/store/factory.py": ("tests/unit/store/test_factory.py", "tests/unit/store/test_http.py"),
    "scrollcase/store/index.py": ("tests/unit/store/test_index.py",),
    "scrollcase/store/local.py": (
        "tests/unit/store/test_local.py",
        "tests/integration/test_publish_local.py",
        _NO_PROCESS_PUBLISHERS,
    ),
    # the unit tests read earlier releases' frame tables from real directory stores; the reuse integration tests
    # (two 16 MB framed releases packed per run, paid by every survivor) are reuse.py's
    "scrollcase/store/publish.py": (
        "tests/unit/store/test_publish.py",
        "tests/integration/test_publish_local.py",
        _NO_PROCESS_PUBLISHERS,
    ),
    "scrollcase/store/publishplan.py": ("tests/unit/store/test_publishplan.py", "tests/unit/store/test_publish.py"),
    "scrollcase/store/remote.py": (
        "tests/unit/store/test_remote.py",
        "tests/unit/store/test_publishplan.py",
        "tests/integration/test_publish_local.py",
        _NO_PROCESS_PUBLISHERS,
    ),
    # moto's server in a thread of the test (started in the forked child) and a proxy: every path in seconds; the
    # SeaweedFS publish tests (a server process, a minute a run) would only be paid by each survivor
    "scrollcase/store/s3.py": ("tests/unit/store/test_s3.py", "tests/unit/store/test_s3_helpers.py"),
    "scrollcase/store/s3rules.py": ("tests/unit/store/test_s3rules.py", "tests/unit/store/test_s3.py"),
    "scrollcase/store/http.py": ("tests/unit/store/test_http.py",),
    "scrollcase/store/reuse.py": (
        "tests/unit/store/test_reuse.py",
        "tests/unit/store/test_reuse_property.py",
        *_REUSE_DIRECTORY_TESTS,
    ),
    "scrollcase/format/paths.py": (
        "tests/unit/format/test_paths.py",
        "tests/unit/format/archive/test_unpack.py",
        "tests/unit/format/test_paths_property.py",
    ),
    # the CLI's integration test (70 s a run) is left out: each survivor of the unit tests would pay for it
    "scrollcase/format/archive/unpack.py": ("tests/unit/format/archive/test_unpack.py",),
    # split from unpack.py (tar member extraction and its checks): the same tests
    "scrollcase/format/archive/extract.py": ("tests/unit/format/archive/test_unpack.py",),
    "scrollcase/format/relocate.py": (
        "tests/unit/format/test_relocate.py",
        "tests/unit/format/test_relocate_mutations.py",
        "tests/unit/format/test_relocate_property.py",
    ),
    "scrollcase/build/verify.py": ("tests/unit/build/test_verify.py",),
    "scrollcase/targets/classify.py": (
        "tests/unit/targets/test_classify.py",
        "tests/unit/lock/test_check.py",
        "tests/unit/targets/test_classify_property.py",
    ),
    "scrollcase/lock/check.py": ("tests/unit/lock/test_check.py",),
    # lock-check's and pixi.toml's accelerator rules, moved out of lock/ into the accelerators
    # (and the accelerator's facts the recipe rules, doctor and selection read: uses_gpu, build_disk_gb, rank)
    "scrollcase/targets/cuda.py": (
        "tests/unit/lock/test_check.py",
        "tests/unit/lock/test_rules.py",
        "tests/unit/targets/test_registry.py",
        "tests/unit/host/test_doctor.py",
        "tests/unit/recipe/test_rules.py",
        "tests/unit/client/test_select.py",
        "tests/unit/lock/test_resolve.py",
    ),
    "scrollcase/targets/cpu.py": (
        "tests/unit/lock/test_check.py",
        "tests/unit/lock/test_rules.py",
        "tests/unit/targets/test_registry.py",
        "tests/unit/host/test_doctor.py",
        "tests/unit/recipe/test_rules.py",
        "tests/unit/client/test_select.py",
        "tests/unit/lock/test_resolve.py",
    ),
    "scrollcase/parity/compare.py": ("tests/unit/parity/test_compare.py", "tests/unit/parity/test_compare_property.py"),
    "scrollcase/client/select.py": ("tests/unit/client/test_select.py",),
    "scrollcase/client/download.py": ("tests/unit/client/test_download.py",),
    "scrollcase/client/framecache.py": ("tests/unit/client/test_framecache.py",),
    "scrollcase/client/upgrade.py": ("tests/unit/client/test_upgrade.py", "tests/integration/test_upgrade_cli.py"),
    "scrollcase/client/install.py": ("tests/unit/client/test_install.py", "tests/integration/test_install_cli.py"),
}


# Survivors argued equivalent by hand (README, "Mutation testing"): module -> (line before, line after
# the mutation, both stripped, or "*": any mutation of a line whose result nothing can observe; why no
# test can tell them apart).  Matched exactly, so a changed line brings its mutants back to be argued.
_FLAGS = "return os.O_WRONLY | os.O_CREAT | os.O_EXCL | extra"
_EXTRA_FLAGS = 'extra: int = getattr(platform, "O_BINARY", 0) | getattr(platform, "O_NOFOLLOW", 0)'
_BUDGET = "budget = min(limits.max_total_bytes, max(limits.ratio_floor, int(limits.max_ratio * max(size, "
_ENV_NAMES = '[n for w, n in zip(words[1:], names[1:], strict=True) if not w.startswith(b"-") and b"=" not in w]'
_SUBDIR = 'package.location.rstrip("/").rsplit("/", {n})[{i}] if "/" in package.location else "noarch",'
_RELEASES = "names = releases[{first}] if len(releases) {op} else f\"{{', '.join(releases[:-1])}} or {{releases[-1]}}\""
_FOUND_CPU = 'found = "a CPU build" if torch.accelerator {op} "cpu" else f"a build for {{torch.accelerator}}"'
_PLURAL = "f\"wheel{{'s' if len(wheels) {op} else ''}}: {{shown}} — CUDA packages under a {{ctx.accelerator}} name\","
_INDEX_FLAVOUR = 'if torch.index.rstrip("/").rsplit("/", {split})[{pick}].startswith("cu"):'
_INDEX_TAG = 'if torch.index.rstrip("/").rsplit("/", {split})[{pick}] != want:'
_INDEX_ARGUMENT = (
    "an index is an absolute URL (scheme://host/...): a '/' is left after rstrip, so rsplit gives two pieces and "
    "[1] is [-1]; the last piece does not depend on maxsplit"
)
_REQUIREMENT_KEY = 'key = "system-requirements.cuda" if table {op} "system-requirements" else "workspace.platforms"'
_FROM_CONDA = 'return {{pypi_name(p.name): p for p in packages if p.kind {op} "conda"}}'
_PIXI_PARTS = 'parts = tuple(int(p) for p in pixi_version.split("-")[0].split("+")[0].split(".")[{cut}])'
_WRITE_CONFLICT = (
    'if code in _CONFLICT_CODES or status in ("412", "409") or (action {op} "PUT" and code == "NoSuchKey"):'
)
_MISSING_BUCKET = 'if code == "NoSuchBucket" or (key is None and (code in _NOT_FOUND_CODES {op} status {cmp} "404")):'
# the URL checks http.py and s3.py share, line for line
_PORT_CHECKS = (
    (
        "port_ok = parts.port is None or parts.port > 0",
        "port_ok = parts.port is None or parts.port != 0",
        "urlsplit's .port raises ValueError for a negative port: the two agree on every port it returns",
    ),
    (
        'parts, port_ok = urlsplit(""), False',
        'parts, port_ok = urlsplit(""), True',
        "urlsplit('') has no scheme and no host: the next check refuses the URL either way",
    ),
)
# s3.py and s3rules.py (split by concern from one): each argued line is in one of them, where it was.
_S3_ARGUED: tuple[tuple[str, str, str], ...] = (
    *_PORT_CHECKS,
    (
        _WRITE_CONFLICT.format(op="=="),
        _WRITE_CONFLICT.format(op="is"),
        "an action is one of this module's own literals, the same interned str",
    ),
    (
        "max_pool_connections=32,",
        "*",
        "how many connections may stay open: the 6 workers' requests fit in either pool, the same requests go out",
    ),
    (
        "for future in futures:",
        "*",
        "cancelling the parts not yet started only spares their requests (racing the workers that take them): "
        "the upload is aborted and the first error raised either way",
    ),
    (
        "error = failed[0].exception()",
        "error = failed[ -1].exception()",
        "the failed futures come from a set (wait's done): which is first is arbitrary, and one failure is both",
    ),
    (
        "for number, (piece, sha) in enumerate(zip(plan, known, strict=True), start=1)",
        "for number, (piece, sha) in enumerate(zip(plan, known, strict=False), start=1)",
        "known is made as long as plan the line before",
    ),
    ("@dataclass(frozen=True)", "@dataclass(frozen=False)", "nothing assigns to or hashes a _Part or a _PartJob"),
    *(
        (
            _MISSING_BUCKET.format(op="or", cmp="=="),
            _MISSING_BUCKET.format(op=op, cmp=cmp),
            "key is None only for check's HEAD of the bucket, whose answer has no body: botocore's code is its "
            "status, so code in _NOT_FOUND_CODES already says whether it is 404",
        )
        for op, cmp in (("and", "=="), ("or", "is"))
    ),
    (
        "except (NoCredentialsError, PartialCredentialsError):",
        "except (NoCredentialsError, CosmicRayTestingException):",
        "botocore raises PartialCredentialsError while the client is made (it resolves the credentials then), "
        "before an S3Store holds it",
    ),
)


# The publish modules (split by concern from one): each argued line is in one of them, where it was.
_PUBLISH_ARGUED: tuple[tuple[str, str, str], ...] = (
    *(
        (
            line,
            line.replace("max(total, 1)", "max(total, 2)"),
            "only a total of 0 or 1 bytes tells 1 from 2, and an archive (a zstd frame at least) is never so short",
        )
        for line in (
            'tenth = state["sent"] * steps // max(total, 1)',
            "progress(f\"  {state['sent'] * 100 // max(total, 1)}% ({state['sent']} of {total} bytes)\")",
        )
    ),
    (
        'if step.action != "upload":',
        'if step.action < "upload":',
        'an action is "upload" or "skip", which sorts first',
    ),
    *(
        (
            line,
            "*",
            "a variable's annotation: a postponed string for a dataclass field, never evaluated for a local",
        )
        for line in (
            "objects: Mapping[str, ObjectInfo | None]",
            "objects: dict[str, ObjectInfo | None] = {}",
            "wanted: list[tuple[ObjectKind, str, int, str, bytes | None]] = [",
        )
    ),
    (
        'if step.action != "upload":',
        'if step.action is not "upload":',
        "the actions are the same interned literals",
    ),
    (
        'if uploads[0].action == "upload" and remote.earlier:',
        'if uploads[0].action >= "upload" and remote.earlier:',
        'an action is "upload" or "skip", which sorts first',
    ),
    (
        'if uploads[0].action == "upload" and remote.earlier:',
        'if uploads[0].action is "upload" and remote.earlier:',
        "the actions are the same interned literals",
    ),
    (
        'return self.size - self.bytes_reused if self.action == "upload" else 0',
        'return self.size - self.bytes_reused if self.action is "upload" else 0',
        "the actions are the same interned literals",
    ),
    (
        'return self.size - self.bytes_reused if self.action == "upload" else 0',
        'return self.size - self.bytes_reused if self.action >= "upload" else 0',
        'an action is "upload" or "skip", which sorts first',
    ),
    *(
        (
            "if existing.size == step.size and existing.sha256 == step.sha256:",
            f"if existing.size {op} step.size and existing.sha256 == step.sha256:",
            "the same sha256 is the same bytes, so the same size",
        )
        for op in (">=", "<=")
    ),
    (
        'return sum(u.size for u in self.uploads if u.action == "upload")',
        'return sum(u.size for u in self.uploads if u.action >= "upload")',
        'an action is "upload" or "skip", which sorts first',
    ),
    (
        "if info is not None and info.sha256 is None and key != manifest.keys.archive:",
        "if info is not None and info.sha256 is None and key is not manifest.keys.archive:",
        "the loop's first key is manifest.keys.archive itself, the others are other strings (other keys)",
    ),
    (
        "*,",
        "/,",
        "only loosens publish()'s signature: every call passes the store, manifest and archive by position, the"
        " rest by keyword",
    ),
    (
        "progress(f\"  {state['sent'] * 100 // max(total, 1)}% ({state['sent']} of {total} bytes)\")",
        "progress(f\"  {state['sent'] * 100 // max(total, 0)}% ({state['sent']} of {total} bytes)\")",
        "only a total of 0 reaches it (the step above divides by max(total, 1)), and an archive is never empty",
    ),
    (
        'return sum(u.size for u in self.uploads if u.action == "upload")',
        'return sum(u.size for u in self.uploads if u.action is "upload")',
        "the actions are the same interned literals",
    ),
    (
        'return tuple(-int(part) if part.isdigit() else 0 for part in core.split("."))',
        'return tuple(~int(part) if part.isdigit() else 0 for part in core.split("."))',
        "~n is -n - 1: the same order",
    ),
    *(
        (
            'core = version.split("+", 1)[0].split("-", 1)[0]',
            f'core = version.split("+", {plus})[0].split("-", {minus})[0]',
            "the first piece of a split does not depend on maxsplit",
        )
        for plus, minus in ((1, 2), (2, 1))
    ),
    *(
        (
            'return copied_bytes(self.pieces) if self.action == "upload" else 0',
            f'return copied_bytes(self.pieces) if self.action {op} "upload" else 0',
            'the actions are the same interned literals, and "skip" sorts before "upload"',
        )
        for op in ("is", ">=")
    ),
    *(
        (
            "moved = Transfer(moved.sent + transfer.sent, moved.reused + transfer.reused)",
            f"moved = Transfer(moved.sent + transfer.sent, moved.reused {op} transfer.reused)",
            "only the archive's transfer reuses bytes: the sum has one term that is not 0, and x ^ 0 = x | 0 = x",
        )
        for op in ("^", "|")
    ),
    (
        'if tenth <= state["reported"]:',
        'if tenth == state["reported"]:',
        "the count only grows, so tenth never falls below what was reported",
    ),
    *(
        (
            'return tuple(-int(part) if part.isdigit() else 0 for part in core.split("."))',
            f'return tuple(-int(part) if part.isdigit() else {n} for part in core.split("."))',
            "a SemVer's core (before - and +) is three numbers: the fallback never runs",
        )
        for n in ("-1", "1")
    ),
)


ARGUED: dict[str, tuple[tuple[str, str, str], ...]] = {
    "scrollcase/store/s3.py": _S3_ARGUED,
    "scrollcase/store/s3rules.py": _S3_ARGUED,
    "scrollcase/store/publish.py": _PUBLISH_ARGUED,
    "scrollcase/store/publishplan.py": _PUBLISH_ARGUED,
    "scrollcase/store/remote.py": _PUBLISH_ARGUED,
    "scrollcase/store/http.py": (
        (
            "*,",
            "/,",
            "HttpStore's signature only loosens: every call passes the URL by position and the rest by keyword",
        ),
        *_PORT_CHECKS,
        (
            "if wanted and response.status != 206:",
            "if wanted and response.status < 206:",
            "urllib follows 3xx and raises HTTPError for >= 400: a response here is 2xx, and no server answers a"
            " GET with 207, 208 or 226",
        ),
        (
            "if response.status == 206:",
            "if response.status >= 206:",
            "urllib follows 3xx and raises HTTPError for >= 400: only 207/208/226 (WebDAV, delta encoding) differ",
        ),
    ),
    "scrollcase/store/base.py": (
        ("CHUNK = 1024 * 1024", "*", "a read size: any size > 0 reads the same bytes"),
        (
            'return int(start), int(end), None if total == "*" else int(total)',
            'return int(start), int(end), None if total is "*" else int(total)',
            "CPython keeps one str object per one-character string",
        ),
        (
            'return int(start), int(end), None if total == "*" else int(total)',
            'return int(start), int(end), None if total <= "*" else int(total)',
            'the regex lets a total be digits or "*", and digits sort after "*"',
        ),
    ),
    "scrollcase/store/factory.py": (
        (
            "*,",
            "/,",
            "only loosens open_read_store's signature: every call passes the location and endpoint by position, the"
            " rest by keyword",
        ),
    ),
    "scrollcase/store/reuse.py": (
        *(
            (
                f"{left} < {right}",
                f"{left} != {right}",
                "it starts at most at the table's length and grows by one: != stops where < does",
            )
            for left, right in (
                ("i + length", "len(frames)"),
                ("and first + length", "len(source.frames)"),
            )
        ),
        (
            "while i < len(frames):",
            "while i != len(frames):",
            "i grows by one or by a run that ends inside the table: it lands on len(frames), never past it",
        ),
        (
            "length = 1",
            "length = 0",
            "the first comparison is of the frame found by its digest and size: it matches, and the run is the same",
        ),
        (
            "@dataclass(frozen=True)",
            "@dataclass(frozen=False)",
            "_Run's: a private record made and read in _longest_run, never assigned to, never hashed (PartRules' and"
            " EarlierArchive's are killed by test_the_rules_and_an_earlier_archive_cannot_change)",
        ),
        (
            "p if not p.copied or p.size >= rules.min_part or n == last else Piece(p.start, p.end)",
            "p if not p.copied or p.size >= rules.min_part or n >= last else Piece(p.start, p.end)",
            "n counts up to last and no further: n >= last only at last",
        ),
        (
            "for source, where in zip(earlier, positions, strict=True):",
            "for source, where in zip(earlier, positions, strict=False):",
            "positions is made from earlier, one for one, in the same call: the lengths are equal",
        ),
        (
            "for a, b in zip(starts, ends, strict=True)",
            "for a, b in zip(starts, ends, strict=False)",
            "ends is starts[1:] and one more: the lengths are equal",
        ),
        (
            "if len(starts) > 1 and piece.size - starts[-1] < rules.min_part:",
            "if len(starts) != 1 and piece.size - starts[-1] < rules.min_part:",
            "starts is empty only for an empty piece, and none is (a frame has a byte at least, and a copy's tail"
            " keeps one at least)",
        ),
        (
            "if piece.copied or piece.size >= min_part or not pending:",
            "if piece.copied or piece.size > min_part or not pending:",
            "a send of exactly min_part lacks 0 bytes, and the copy after it stands (at least min_part, or the"
            " last): the other branch appends the same send and that copy whole",
        ),
    ),
    "scrollcase/store/local.py": (
        *(
            (
                "token = secrets.token_hex(8)",
                f"token = secrets.token_hex( {n})",
                "the lock's token only has to differ from another writer's: 7 or 9 random bytes do as well as 8",
            )
            for n in (7, 9)
        ),
        (
            "if done != piece.size:",
            "if done < piece.size:",
            "copy_range never copies more than it is asked for, so done > piece.size cannot happen",
        ),
        ("while chunk := src.read(CHUNK * 8):", "*", "a read size: any size > 0 copies and hashes the same bytes"),
        *(
            (
                "fd = os.open(target, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)",
                f"fd = os.open(target, os.O_CREAT | os.O_EXCL | os.O_WRONLY, {mode})",
                "the claimed file is replaced by the temp file at once: the mode of the claim never shows",
            )
            for mode in (419, 421)
        ),
        *(
            (
                'with temp.open("xb", buffering=0) as out, upload.path.open("rb", buffering=0) as local:',
                f'with temp.open("xb", buffering=0) as out, upload.path.open("rb", buffering= {size}) as local:',
                "the archive is read by copy_file_range at explicit offsets or by seek and read: buffered alike",
            )
            for size in (1, -1)
        ),
        *(
            (
                'with source.open("rb", buffering=0) as earlier:',
                f'with source.open("rb", buffering= {size}) as earlier:',
                "the earlier file is read by copy_file_range at explicit offsets or by seek and read: buffered alike",
            )
            for size in (1, -1)
        ),
        *(
            (
                "fd = os.open(target, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)",
                f"fd = os.open(target, os.O_CREAT | os.O_EXCL {op} os.O_WRONLY, 0o644)",
                "the fd only claims the name and is closed at once: O_WRONLY (1) or O_RDONLY (0) claims it the same",
            )
            for op in ("^", "+", "//", "*", "**")  # 128 op 1 is 128 or 129: O_EXCL kept
        ),
        *(
            (
                "fd = os.open(target, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)",
                f"fd = os.open(target, os.O_CREAT {op} os.O_EXCL | os.O_WRONLY, 0o644)",
                "+, ^ and | agree on distinct flag bits",
            )
            for op in ("^", "+")
        ),
        ("time.sleep(0.02)", "*", "the poll interval of a lock wait: any short pause takes the lock the same"),
        (
            "LOCK_WAIT_SECONDS = 30.0",
            "*",
            "how long a live lock is waited for: only waiting out the 30 s could tell 29 from 31",
        ),
        (
            "if time.time() - lock.stat().st_mtime > STALE_LOCK_SECONDS:",
            "if time.time() - lock.stat().st_mtime >= STALE_LOCK_SECONDS:",
            "exactly 60.0 s of age, to the clock's last digit: no test can land on it",
        ),
        (
            "if time.monotonic() > deadline:",
            "if time.monotonic() >= deadline:",
            "the same instant on a monotonic clock of nanoseconds: no test can land on it",
        ),
    ),
    "scrollcase/format/paths.py": (
        *(
            ('return name[:cut] if cut >= 0 else ""', f'return name[:cut] if cut {op} else ""', "name[:0] is '' too")
            for op in ("> 0", ">= 1")
        ),
        *(
            (
                'return base + (name if sep == "/" else name.replace("/", sep))',
                f'return base + (name if sep {op} "/" else name.replace("/", sep))',
                'for sep "/" the other branch is the same string; "\\\\" > "/" keeps its branch',
            )
            for op in ("is", "<", "<=")
        ),
        (
            'if part.split(".", 1)[0].rstrip(" ").upper() in _WINDOWS_DEVICES:',
            'if part.split(".", 2)[0].rstrip(" ").upper() in _WINDOWS_DEVICES:',
            "the first piece of a split does not depend on maxsplit",
        ),
    ),
    "scrollcase/format/relocate.py": (
        (
            'tail = data[-(len(needle) - 1) :] if len(needle) > 1 else b""',
            'tail = data[-(len(needle) ^ 1) :] if len(needle) > 1 else b""',
            "n ^ 1 is n - 1 for an odd n and n + 1 for an even one: the overlap is never shorter",
        ),
        (
            f"names = {_ENV_NAMES}[:1]",
            f"names = {_ENV_NAMES}[: 2]",
            "only names[0] is read",
        ),
        (
            'names = [w.rsplit(b"/", 1)[-1] for w in words]',
            'names = [w.rsplit(b"/", 2)[-1] for w in words]',
            "the last piece of an rsplit does not depend on maxsplit",
        ),
    ),
    "scrollcase/build/verify.py": (
        (
            "release: Path, *, self_test: bool, junit: Path | None = None, temp_parent: Path | None = None",
            "release: Path, /, self_test: bool, junit: Path | None = None, temp_parent: Path | None = None",
            "only loosens the signature: every call passes release by position and the flags by keyword",
        ),
        (
            'problems += layout_problems(root, box, manifest, manifest.target.platform == "windows")',
            'problems += layout_problems(root, box, manifest, manifest.target.platform is "windows")',
            "pydantic's Literal validation returns the literal's own str object, so `is` is `==` here",
        ),
        (
            'problems += layout_problems(root, box, manifest, manifest.target.platform == "windows")',
            'problems += layout_problems(root, box, manifest, manifest.target.platform >= "windows")',
            'no platform sorts after "windows" (linux, osx, windows)',
        ),
    ),
    "scrollcase/format/archive/unpack.py": (
        *(
            (
                line,
                "*",
                "a size or bound with no observable output: any value that still reads forward gives the same tree",
            )
            for line in (
                "READ_CHUNK = 1 << 20",
                "OUT_CHUNK = 4 << 20  # most decompressed bytes per call (and per queued chunk)",
            )
        ),
        (
            "def read(self, n: int = -1) -> bytes:",
            "*",
            "the default is never used: zstandard's reader and finish() always pass a size",
        ),
        (
            "chunks: queue.Queue[bytes | None] = field(default_factory=lambda: queue.Queue(_QUEUE_DEPTH))",
            "*",
            "a dataclass field's annotation: kept a string, read only to spot ClassVar",
        ),
        ("_QUEUE_DEPTH = 16  # decompressed chunks in flight: bounds memory (16 x OUT_CHUNK)", "*", "a memory knob"),
        (
            "*,",
            "/,",
            "unpack_archive's signature only loosens: callers pass archive and dest by position, the rest by keyword",
        ),
        *(
            (
                f"{_BUDGET}1))))",
                f"{_BUDGET}{n}))))",
                "only an expected size of 0 or 1 byte meets the max: that archive is refused (its size, or as not"
                " zstd) before anything is written",
            )
            for n in (0, 2)
        ),
        (
            'thread = threading.Thread(target=feed.run, name="scrollcase-unpack-feed", daemon=True)',
            'thread = threading.Thread(target=feed.run, name="scrollcase-unpack-feed", daemon=False)',
            "the thread is always joined before its unpack returns or raises",
        ),
        (
            'cast("IO[bytes]", source), read_size=READ_CHUNK, read_across_frames=True, closefd=False',
            'cast("IO[bytes]", source), read_size=READ_CHUNK, read_across_frames=True, closefd=True',
            "the reader is never closed, and only close() reads closefd (not garbage collection, zstandard 0.25)",
        ),
        (
            "shutil.rmtree(tmp, ignore_errors=True)",
            "shutil.rmtree(tmp, ignore_errors=False)",
            "the temp folder is this unpack's own and still there on every failure path: rmtree succeeds either way",
        ),
        (
            "size: int = 0",
            "*",
            "the feed's size is set in run()'s finally whenever the archive opened; else the unpack fails unread",
        ),
        *(
            ("while True:", never, "_drain's loop (_extract_all's is killed): once stop is set a put gives up in 0.1 s")
            for never in ("while False:", "while not True:")
        ),
        (
            "while not self.stop.is_set() and source.error is None:",
            "while not self.stop.is_set() or source.error is None:",
            "decompresses on past the walker's finding, which outranks whatever follows from it",
        ),
        (
            "self.chunks.put(item, timeout=0.1)",
            "self.chunks.put(item, timeout= 1.1)",
            "how often a put blocked on a full queue looks at stop: only the timing changes",
        ),
        (
            'cast("IO[bytes]", source), read_size=READ_CHUNK, read_across_frames=True, closefd=False',
            'cast("IO[bytes]", source), read_size=READ_CHUNK, read_across_frames=False, closefd=False',
            "zstandard 0.25's reader returns the next frame on the next read() either way: only the chunks change",
        ),
    ),
    # the tar members' extraction and its checks, split from unpack.py (8691bdb): the arguments made there
    "scrollcase/format/archive/extract.py": (
        (
            "_MAX_TRAILER = 1 << 20  # after the end-of-archive marker: record padding (GNU tar: < 10 KiB)",
            "*",
            "a size or bound with no observable output: any value that still reads forward gives the same tree",
        ),
        *(
            (
                f'if {left} {op} "{kind}":',
                f'if {left} {new} "{kind}":',
                "the kinds are the same interned literals: is is ==",
            )
            for left, op, new, kind in (
                ("header.kind", "==", "is", "file"),
                ("self.kinds.get(source)", "!=", "is not", "file"),
                ("self.kinds.get(name)", "!=", "is not", "implicit"),
                ("header.size and header.kind", "!=", "is not", "dir"),
            )
        ),
        (
            'if previous is not None and not (previous == "implicit" and header.kind == "dir"):',
            'if previous is not None and not (previous == "implicit" and header.kind is "dir"):',
            "the kinds are the same interned literals: is is ==",
        ),
        ('elif header.kind == "symlink":', 'elif header.kind is "symlink":', "the kinds are interned literals"),
        ('if header.kind == "dir":', 'if header.kind is "dir":', "the kinds are interned literals"),
        (
            'if previous is not None and not (previous == "implicit" and header.kind == "dir"):',
            'if previous is not None and not (previous is "implicit" and header.kind == "dir"):',
            "the kinds are the same interned literals: is is ==",
        ),
        (
            'if previous is not None and not (previous == "implicit" and header.kind == "dir"):',
            'if previous is not None and not (previous == "implicit" and header.kind <= "dir"):',
            "of the kinds that reach it (file, dir, symlink, hardlink) only dir sorts <= dir",
        ),
        (
            'elif header.kind == "symlink":',
            'elif header.kind >= "symlink":',
            "only symlink and hardlink reach it, and hardlink sorts before symlink",
        ),
        (
            'if header.kind == "dir":',
            'if header.kind <= "dir":',
            "files are handled above: of dir, symlink and hardlink only dir sorts <= dir",
        ),
        (
            'if header.size and header.kind != "dir":',
            'if header.size and header.kind > "dir":',
            "files are handled above: symlink and hardlink both sort after dir",
        ),
        *(
            (line, line.replace(old, new, 1), "+, ^ and | agree on distinct flag bits")
            for line, old in (
                (_FLAGS, "O_EXCL | extra"),
                (_FLAGS, "O_CREAT | os.O_EXCL"),
                (_FLAGS, "O_WRONLY | os.O_CREAT"),
                (_EXTRA_FLAGS, '0) | getattr(platform, "O_NOFOLLOW"'),
            )
            for new in (old.replace("|", "+"), old.replace("|", "^"))
        ),
        *(
            (_EXTRA_FLAGS, _EXTRA_FLAGS.replace(old, old.replace("0", "1"), 1), "O_WRONLY is 1 on every platform")
            for old in ('"O_BINARY", 0)', '"O_NOFOLLOW", 0)')
        ),
        (
            'return platform == "win32"',
            'return platform >= "win32"',
            'no sys.platform sorts after "win32" (aix, android, cygwin, darwin, emscripten, ios, linux, wasi)',
        ),
    ),
    "scrollcase/client/download.py": (
        (
            "partial.unlink(missing_ok=True)",
            "partial.unlink(missing_ok=False)",
            "each runs while the partial file exists: it holds have > 0 bytes, is open for appending, or was touched",
        ),
        *(
            (
                f"{head} have {op} size:",
                f"{head} have != size:",
                "have never passes size: _append refuses a longer chunk",
            )
            for head, op in (("while", "<"), ("if", "<"))
        ),
        (
            "if have > before and tries < attempts:",
            "if have != before and tries < attempts:",
            "within a try the partial only grows (the refusals that delete it raise IntegrityError, not StoreError)",
        ),
        (
            "for _ in range(2):",
            "for _ in range( 3):",
            "a third try differs only when other processes re-create a stale lock twice in between: a race",
        ),
        ("*,", "/,", "only loosens the signature: every call passes store and key by position, the rest by keyword"),
        (
            "lock.unlink(missing_ok=True)",
            "lock.unlink(missing_ok=False)",
            "the stale lock try_lock just failed on is there (only a race removes it); the finally's is killed",
        ),
    ),
    "scrollcase/client/upgrade.py": (
        (
            "_discard(sib.previous, ignore_errors=True)",
            "_discard(sib.previous, ignore_errors=False)",
            "the old tree this run just renamed aside: only a non-root user's read-only folder in it fails rmtree",
        ),
        (
            "def _discard(tree: Path, *, ignore_errors: bool = False) -> None:",
            "def _discard(tree: Path, /, ignore_errors: bool = False) -> None:",
            "only loosens the signature: every call passes tree by position and ignore_errors by keyword",
        ),
    ),
    "scrollcase/client/select.py": (
        *(
            ('GPU_RANK = {"pass": 2, "skip": 1, "warn": 1}', f"GPU_RANK = {new}", why)
            for new, why in (
                ('{"pass": 2, "skip": 2, "warn": 1}', "skip is every CUDA candidate's status or none's: never ranked"),
                ('{"pass": 2, "skip": 0, "warn": 1}', "skip is every CUDA candidate's status or none's: never ranked"),
                ('{"pass": 3, "skip": 1, "warn": 1}', "only the ranks' order is read: pass stays above warn"),
                ('{"pass": 2, "skip": 1, "warn": 0}', "only the ranks' order is read: warn stays below pass"),
            )
        ),
        ("return numbers, 1, ()", "return numbers, 2, ()", "only its order against a pre-release's 0 is read"),
        ("return numbers, 0, ids", "return numbers, -1, ids", "only its order against a release's 1 is read"),
        (
            'ids = tuple((0, int(part), "") if part.isdigit() else (1, 0, part) for part in pre.split("."))',
            'ids = tuple((0, int(part), "") if part.isdigit() else (1, -1, part) for part in pre.split("."))',
            "the middle is the same for every alphanumeric identifier",
        ),
        (
            'ids = tuple((0, int(part), "") if part.isdigit() else (1, 0, part) for part in pre.split("."))',
            'ids = tuple(( -1, int(part), "") if part.isdigit() else (1, 0, part) for part in pre.split("."))',
            "numeric identifiers still sort below alphanumeric ones",
        ),
        *(
            (
                'ids = tuple((0, int(part), "") if part.isdigit() else (1, 0, part) for part in pre.split("."))',
                f'ids = tuple((0, int(part), "") if part.isdigit() else {new} for part in pre.split("."))',
                why,
            )
            for new, why in (
                ("( 2, 0, part)", "alphanumeric identifiers still sort above numeric ones"),
                ("(1, 1, part)", "the middle is the same for every alphanumeric identifier"),
            )
        ),
        *(
            (
                "gpu = GPU_RANK.get(candidate.gpu.status, 0) if candidate.gpu else 0",
                f"gpu = GPU_RANK.get(candidate.gpu.status, {new}",
                "only fail is not a key, and a failed check's candidate does not fit: it is never ranked",
            )
            for new in ("1) if candidate.gpu else 0", "-1) if candidate.gpu else 0")
        ),
        *(
            (
                "gpu = GPU_RANK.get(candidate.gpu.status, 0) if candidate.gpu else 0",
                f"gpu = GPU_RANK.get(candidate.gpu.status, 0) if candidate.gpu else {new}",
                "a CPU or Metal candidate ties on (accelerator, version) only with itself: one target per platform",
            )
            for new in ("1", "-1")
        ),
        *(
            (
                "return semver_key(version) if SEMVER_RE.fullmatch(version) else ((), 0, ())",
                f"return semver_key(version) if SEMVER_RE.fullmatch(version) else ((), {new}, ())",
                "() sorts below any version's numbers: the middle is only compared between two non-semver keys",
            )
            for new in ("1", "-1")
        ),
    ),
    "scrollcase/parity/compare.py": (
        ("CHUNK_ELEMENTS = 1 << 18", "*", "a memory/speed knob: test_chunking_does_not_change_any_metric"),
        (
            "worst_ratio: float = -1.0  # |a-b| / (absolute + relative*|ref|): > 1 means the element fails",
            "*",
            "overwritten by the first chunk: ratios are >= 0",
        ),
        *(
            (
                "if scratch[worst] > 1.0:",
                f"if scratch[worst] {op} 1.0:",
                "only skips counting; the count is scratch > 1.0",
            )
            for op in ("!=", ">=")
        ),
        ("if ref.size == 0:", "if ref.size <= 0:", "a size is never negative"),
        (
            "if np.count_nonzero(abs_ref) != abs_ref.size:",
            "if np.count_nonzero(abs_ref) is not abs_ref.size:",
            "the guard only skips masking; masking anyway gives the same numbers",
        ),
        ("@dataclass(frozen=True)", "@dataclass(frozen=False)", "no code assigns to an ArrayInfo"),
    ),
    "scrollcase/targets/classify.py": (
        (
            'if mutex is not None and mutex.build == "cpu":',
            "*",
            'a pytorch-mutex can only say "cpu", which is also the verdict without it (`or "cpu"`)',
        ),
        ("if match.group(1):", "if match.group( 2):", "groups 1 and 2 are one alternative: set together or not at all"),
        (
            'return ".".join(parts[:2]) if len(parts) >= 2 else version',
            'return ".".join(parts[:2]) if len(parts) >= 1 else version',
            "one part joined is the version itself",
        ),
        *(
            (
                'return ".".join(parts[:2]) if len(parts) >= 2 else version',
                f'return ".".join(parts[:2]) if len(parts) {op} else version',
                "two parts joined by '.' are the version itself; only '2+cu118' (no CUDA package's version) differs",
            )
            for op in ("> 2", ">= 3", "!= 2")
        ),
        *(
            (
                f'return [p for p in packages if p.kind == "pypi" and {regex}.match(p.name)]',
                f'return [p for p in packages if p.kind >= "pypi" and {regex}.match(p.name)]',
                'a kind is "conda" or "pypi": nothing sorts after "pypi"',
            )
            for regex in ("_CUDA_RUNTIME_WHEEL", "_CUDA_LIBRARY_WHEEL")
        ),
    ),
    "scrollcase/lock/check.py": (
        *(
            (
                _SUBDIR.format(n=2, i=-2),
                _SUBDIR.format(n=n, i=i),
                "rattler's MatchSpec.matches never reads a record's subdir (conda-forge/linux-64::x matches noarch)",
            )
            for n, i in ((2, "- 1"), (1, -2), (2, "not 2"), (3, -2))
        ),
        ("_BUILD_NUMBER = 0", "*", "the lock model keeps no build number and no spec made from pixi.toml names one"),
        *(
            (
                'conda = {p.name: p for p in packages if p.kind == "conda"}',
                f'conda = {{p.name: p for p in packages if p.kind {op} "conda"}}',
                'a kind is "conda" or "pypi" (which sorts after), and a conda kind is always the literal "conda"',
            )
            for op in ("is", "<=")
        ),
        *(
            (
                _FROM_CONDA.format(op="=="),
                _FROM_CONDA.format(op=op),
                'a conda kind is the literal "conda", and "pypi" sorts after it',
            )
            for op in ("is", "<=")
        ),
        (
            'if package.kind == "pypi" and not package.filename.endswith(".whl"):',
            'if package.kind >= "pypi" and not package.filename.endswith(".whl"):',
            'a kind is "conda" or "pypi": nothing sorts after "pypi"',
        ),
        (
            'wheels = {p.name: p for p in packages if p.kind == "pypi"}',
            'wheels = {p.name: p for p in packages if p.kind >= "pypi"}',
            'a kind is "conda" or "pypi": nothing sorts after "pypi"',
        ),
        ('if text == "*":', 'if text is "*":', "CPython keeps one str object per one-character string"),
        *(
            (
                "if len(names) > 1 and own:",
                f"if len(names) {op} and own:",
                "with one name or none, `solved or names` is the same list",
            )
            for op in (">= 1", "> 0", "!= 1")
        ),
        *(
            (f"if verdict is {value}:", f"if verdict == {value}:", "a verdict is True, False or a str")
            for value in ("True", "False")
        ),
        (
            _PIXI_PARTS.format(cut=":3"),
            _PIXI_PARTS.format(cut=": 4"),
            "a pixiVersion is a SemVer: three dotted numbers before its - or +",
        ),
    ),
    # lock-check's accelerator rules moved into the accelerators (c056581): the arguments made in lock/check.py
    "scrollcase/targets/cuda.py": (
        *(
            (_INDEX_TAG.format(split=1, pick=-1), _INDEX_TAG.format(split=split, pick=pick), _INDEX_ARGUMENT)
            for split, pick in ((1, "+1"), (1, 1), (2, -1))
        ),
        *(
            (
                _REQUIREMENT_KEY.format(op="=="),
                _REQUIREMENT_KEY.format(op=op),
                'table is one of the two literals set on the line above, and "workspace" sorts after',
            )
            for op in ("is", "<=")
        ),
        (
            'elif _major_minor_of(declared) != cuda or declared.count(".") > 1:',
            'elif _major_minor_of(declared) != cuda or declared.count(".") != 1:',
            "a declared CUDA without a dot is never the target's major.minor: the first test refuses it already",
        ),
        (
            'return ".".join(version.split(".")[:2])',
            'return ".".join(version.split(".")[: 3])',
            "its one caller refuses a declared CUDA of more than one dot anyway; with one dot or none [:3] is [:2]",
        ),
        *(
            (
                _RELEASES.format(first=0, op="== 1"),
                _RELEASES.format(first=first, op=op),
                "one release is both releases[0] and releases[-1]; no releases returned earlier",
            )
            for first, op in ((" -1", "== 1"), (0, "<= 1"))
        ),
        *(
            (
                _FOUND_CPU.format(op="=="),
                _FOUND_CPU.format(op=op),
                'a conda build is the literal "cpu" or "cudaX.Y", which sorts after "cpu"',
            )
            for op in ("is", "<=")
        ),
        (
            'if torch.provider == "pypi":',
            'if torch.provider is "pypi":',
            'a provider is None or classify\'s literal "conda" or "pypi"',
        ),
        (
            'if torch.provider == "pypi":',
            'if torch.provider >= "pypi":',
            'cuda_problems: a provider of None returned earlier, "conda" sorts first',
        ),
        (
            'cpu = torch.accelerator == "cpu"',
            'cpu = torch.accelerator <= "cpu"',
            'a wheel\'s accelerator is "cpu", "cudaX.Y" or "rocmX.Y": the others sort after "cpu"',
        ),
    ),
    "scrollcase/targets/cpu.py": (
        *(
            (
                _INDEX_FLAVOUR.format(split=1, pick=-1),
                _INDEX_FLAVOUR.format(split=split, pick=pick),
                _INDEX_ARGUMENT,
            )
            for split, pick in ((1, "+1"), (1, 1), (2, -1))
        ),
        (
            'if torch.provider == "pypi":',
            'if torch.provider is "pypi":',
            'a provider is None or classify\'s literal "conda" or "pypi" (`>=` is killed: None >= "pypi" raises)',
        ),
        (_PLURAL.format(op="> 1"), _PLURAL.format(op="!= 1"), "no wheels returned earlier"),
    ),
}


def _changed_lines(diff: str) -> tuple[list[str], list[str]]:
    removed = [line[1:] for line in diff.splitlines() if line.startswith("-") and not line.startswith("---")]
    added = [line[1:] for line in diff.splitlines() if line.startswith("+") and not line.startswith("+++")]
    return removed, added


def equivalent_reason(module: str, diff: str, postponed_annotations: bool) -> str | None:
    """Why a surviving mutant cannot change behaviour: a mutated return annotation in a module with
    ``from __future__ import annotations`` (a string nothing evaluates), or one argued in ARGUED."""
    removed, added = _changed_lines(diff)
    if len(removed) != 1 or len(added) != 1:
        return None
    before, after = removed[0], added[0]
    is_def = before.lstrip().startswith("def ") and " -> " in before
    if postponed_annotations and is_def and before.split(" -> ")[0] == after.split(" -> ")[0]:
        return "return annotation (never evaluated)"
    for old, new, reason in ARGUED.get(module, ()):
        if before.strip() == old and new in (after.strip(), "*"):
            return reason
    return None


Span = tuple[tuple[int, int], tuple[int, int]]  # (line, column) of the first and past the last character
SKIPPED_ANNOTATION = "inside a function annotation (never evaluated)"


def annotation_spans(source: str) -> list[Span]:
    """Where each function's parameter and return annotations lie; empty unless annotations are
    postponed (then they stay strings: nothing in the core rooms calls ``get_type_hints`` on a function).
    Class-level annotations are left out on purpose: pydantic and dataclasses read those."""
    if "from __future__ import annotations" not in source:
        return []
    spans: list[Span] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            a = node.args
            params = [*a.posonlyargs, *a.args, *a.kwonlyargs, *(p for p in (a.vararg, a.kwarg) if p)]
            for note in [node.returns, *(p.annotation for p in params)]:
                if note is not None and note.end_lineno is not None and note.end_col_offset is not None:
                    spans.append(((note.lineno, note.col_offset), (note.end_lineno, note.end_col_offset)))
    return spans


def skip_annotation_mutants(session: Path, spans: list[Span]) -> int:
    """Record every mutant that lies inside an annotation as skipped before ``exec``; returns how many."""
    with sqlite3.connect(session) as db:
        specs = db.execute(
            "SELECT job_id, start_pos_row, start_pos_col, end_pos_row, end_pos_col FROM mutation_specs"
        ).fetchall()
        inside = [
            job for job, *pos in specs if any(lo <= (pos[0], pos[1]) and (pos[2], pos[3]) <= hi for lo, hi in spans)
        ]
        db.executemany(
            "INSERT INTO work_results (worker_outcome, output, test_outcome, diff, job_id) "
            "VALUES ('SKIPPED', ?, NULL, NULL, ?)",
            [(SKIPPED_ANNOTATION, job) for job in inside],
        )
    return len(inside)


@dataclass
class Outcome:
    module: str
    counts: dict[str, int] = field(default_factory=dict)
    survivors: list[str] = field(default_factory=list)  # the diff of each surviving mutant
    equivalent: int = 0  # skipped annotation mutants + survivors recognised by equivalent_reason
    recognised: int = 0  # of the survivors: those recognised as equivalent
    seconds: float = 0.0

    @property
    def mutants(self) -> int:
        return sum(self.counts.values())

    @property
    def score(self) -> float:
        """Killed of the non-equivalent mutants that ran (incompetent ones did not)."""
        killed, survived = self.counts.get("killed", 0), self.counts.get("survived", 0) - self.recognised
        return killed / (killed + survived) if killed + survived else 1.0


PYTEST_ARGS = ("-x", "-q", "-p", "no:cacheprovider")
# imported once by the fork server, so that each mutant's test run starts without paying for them;
# never scrollcase itself (each mutant's child imports the mutated module fresh)
RUNNER = "mutation_runner.py"  # this script's copy in the throwaway checkout: the server and its clients
PRELOAD = ("pytest", "hypothesis", "numpy", "pydantic", "zstandard", "yaml", "boto3", "moto.server")


def config_text(module: str, tests: tuple[str, ...], timeout: float, server: Path | None) -> str:
    if server is None:
        command = f"{sys.executable} -m pytest {' '.join(PYTEST_ARGS)} " + " ".join(tests)
    else:
        command = f"{sys.executable} -I -S {server.with_name(RUNNER)} --client {server} {timeout} " + " ".join(tests)
    return (
        f'[cosmic-ray]\nmodule-path = "{module}"\ntimeout = {timeout}\nexcluded-modules = []\n'
        f'test-command = "{command}"\n\n[cosmic-ray.distributor]\nname = "local"\n'
    )


def serve(address: str) -> None:
    """The fork server: preload the heavy imports once, then run each request's pytest in a fork.

    A child that runs past the request's timeout is killed (cosmic-ray can only kill the client, and
    the next mutant would wait for it).  Bytecode is never written, so a mutant is never run from a stale ``.pyc``."""
    for name in PRELOAD:
        with contextlib.suppress(ImportError):
            __import__(name)
    import pytest

    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(address)
    listener.listen(1)
    while True:
        conn, _ = listener.accept()
        with conn:
            timeout, tests = json.loads(conn.recv(1 << 16).decode())
            pid = os.fork()
            if pid == 0:
                listener.close()
                os.setpgid(0, 0)  # its own group: a timeout kills the processes its tests started too
                null = os.open(os.devnull, os.O_WRONLY)
                os.dup2(null, 1)
                os.dup2(null, 2)
                code = 4  # pytest's "internal error", should pytest.main itself raise
                try:
                    code = int(pytest.main([*PYTEST_ARGS, *tests]))
                finally:
                    os._exit(code)
            status = _wait_or_kill(pid, time.monotonic() + timeout + 1)
            with contextlib.suppress(OSError):
                conn.sendall(str(os.waitstatus_to_exitcode(status)).encode())


def _wait_or_kill(pid: int, deadline: float) -> int:
    """The child's wait status; past ``deadline`` it is killed first (an alarm of its own would not do:
    pytest-timeout re-arms SIGALRM for every test)."""
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return status
        if time.monotonic() > deadline:
            with contextlib.suppress(OSError):
                os.killpg(pid, signal.SIGKILL)
            return os.waitpid(pid, 0)[1]
        time.sleep(0.01)


def client(address: str, timeout: str, tests: list[str]) -> int:
    """A mutant's test command: ask the fork server to run ``tests``; its exit status is pytest's."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
        conn.connect(address)
        conn.sendall(json.dumps([float(timeout), tests]).encode())
        answer = conn.recv(64).decode()
    return int(answer) if answer else 3


@contextlib.contextmanager
def fork_server(work: Path) -> Iterator[Path | None]:
    """A running fork server for ``work`` (None where there is no fork: plain pytest runs instead)."""
    if not hasattr(os, "fork"):
        yield None
        return
    address = work / "fork.sock"
    shutil.copy2(__file__, work / RUNNER)  # editing this script during a run cannot break its clients
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1", OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1")
    server = subprocess.Popen([sys.executable, str(work / RUNNER), "--serve", str(address)], cwd=work, env=env)
    try:
        while not address.exists():
            if server.poll() is not None:
                raise SystemExit("the fork server did not start")
            time.sleep(0.1)
        yield address
        if server.poll() is not None:  # then every later mutant "failed": the counts would lie
            raise SystemExit("the fork server died during the run")
    finally:
        server.kill()
        server.wait()


def copy_checkout(into: Path) -> None:
    """The files the tests need, without .git, venvs, caches or build output."""
    ignore = shutil.ignore_patterns("__pycache__", ".scrollcase", "*.pyc")
    for name in COPIED:
        source = REPO / name
        if source.is_dir():
            shutil.copytree(source, into / name, ignore=ignore)
        elif source.is_file():
            shutil.copy2(source, into / name)


def cosmic_ray(work: Path, *args: str) -> float:
    """Run one cosmic-ray command in ``work``; returns its wall time in seconds."""
    tool = Path(sys.executable).with_name("cosmic-ray")
    start = time.monotonic()
    subprocess.run([str(tool), *args], cwd=work, check=True, stdout=subprocess.DEVNULL)
    return time.monotonic() - start


def read_session(module: str, session: Path) -> Outcome:
    outcome = Outcome(module)
    postponed = "from __future__ import annotations" in (REPO / module).read_text(encoding="utf-8")
    with sqlite3.connect(session) as db:
        rows = db.execute("SELECT worker_outcome, test_outcome, diff FROM work_results").fetchall()
    for worker, test, diff in rows:
        kind = str(test or worker).lower()
        outcome.counts[kind] = outcome.counts.get(kind, 0) + 1
        if kind == "skipped":
            outcome.equivalent += 1
        elif kind == "survived" and equivalent_reason(module, str(diff), postponed):
            outcome.equivalent += 1
            outcome.recognised += 1
        elif kind == "survived":
            outcome.survivors.append(str(diff))
    return outcome


def mutate(module: str, timeout: float | None, fork: bool = True) -> Outcome:
    """Run cosmic-ray on ``module`` in a fresh copy of the checkout."""
    tests = CORE.get(module)
    if tests is None:
        raise SystemExit(f"{module} is not a core room; --list shows them")
    start = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="scrollcase-mutation-") as tmp:
        work = Path(tmp)
        copy_checkout(work)
        config = work / "mutation.toml"
        with fork_server(work) if fork else contextlib.nullcontext() as server:
            config.write_text(config_text(module, tests, timeout or 600.0, server), encoding="utf-8")
            baseline = cosmic_ray(work, "baseline", config.name)  # the unmutated tests must pass first
            if timeout is None:  # a few baseline runs: room for a busy machine, not for a mutant that loops
                config.write_text(config_text(module, tests, max(15.0, 3 * baseline), server), encoding="utf-8")
            cosmic_ray(work, "init", config.name, "session.sqlite")
            spans = annotation_spans((REPO / module).read_text(encoding="utf-8"))
            skip_annotation_mutants(work / "session.sqlite", spans)
            cosmic_ray(work, "exec", config.name, "session.sqlite")
        outcome = read_session(module, work / "session.sqlite")
    outcome.seconds = time.monotonic() - start
    return outcome


def report(outcomes: list[Outcome]) -> None:
    print(f"{datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC, cosmic-ray, {' '.join(sys.argv)}")
    header = ("module", "mutants", "killed", "survived", "equivalent", "incompetent", "score", "minutes")
    print(f"{header[0]:<28} " + " ".join(f"{h:>{max(len(h), 6)}}" for h in header[1:]))
    for o in outcomes:
        c = o.counts
        print(
            f"{o.module.removeprefix('scrollcase/'):<28} {o.mutants:>7} {c.get('killed', 0):>6} "
            f"{c.get('survived', 0):>8} {o.equivalent:>10} {c.get('incompetent', 0):>11} {o.score:>6.1%} "
            f"{o.seconds / 60:>7.1f}"
        )
    for o in outcomes:
        for diff in o.survivors:
            print(f"\nsurvived in {o.module}:\n{diff}")


def stale_references() -> list[str]:
    """What CORE and ARGUED name that the checkout no longer has: a core module or test file that is gone, an
    argued module outside CORE (never run), or an argued line found in none of the modules that share its list
    (code that moved or changed: its mutants must be argued again where the code now is)."""
    found: list[str] = []
    for module, tests in CORE.items():
        paths = [module, *(t.split("=", 1)[-1].split("::")[0] for t in tests)]
        found += [f"{module}: {path} does not exist" for path in paths if not (REPO / path).is_file()]
    sharing: dict[int, list[str]] = {}
    for module, entries in ARGUED.items():
        sharing.setdefault(id(entries), []).append(module)
        if module not in CORE:
            found.append(f"{module}: argued but not a core room")
    for modules in sharing.values():
        lines = {
            line.strip()
            for module in modules
            if (REPO / module).is_file()
            for line in (REPO / module).read_text(encoding="utf-8").splitlines()
        }
        found += [f"{', '.join(modules)}: no line {old!r}" for old, _, _ in ARGUED[modules[0]] if old not in lines]
    return found


def main() -> None:
    if sys.argv[1:2] == ["--client"]:  # first, before anything slow: this runs once per mutant
        raise SystemExit(client(sys.argv[2], sys.argv[3], sys.argv[4:]))
    if sys.argv[1:2] == ["--serve"]:
        serve(sys.argv[2])
        return
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("modules", nargs="*", help="core modules to mutate (default: every core room)")
    parser.add_argument(
        "--timeout", type=float, default=None, help="seconds per mutant's test run (default: 3 baseline runs, >= 15)"
    )
    parser.add_argument("--list", action="store_true", help="print the core rooms and their tests")
    parser.add_argument("--no-fork", action="store_true", help="start a fresh pytest per mutant (slower)")
    parser.add_argument(
        "--check", action="store_true", help="check that every core module, test and argued line still exists"
    )
    args = parser.parse_args()
    if args.check:
        stale = stale_references()
        print("\n".join(stale) or f"{len(CORE)} core rooms, their tests and every line ARGUED quotes: all found")
        raise SystemExit(1 if stale else 0)
    if args.list:
        for module, tests in CORE.items():
            print(f"{module}: {' '.join(tests)}")
        return
    report([mutate(module, args.timeout, not args.no_fork) for module in args.modules or CORE])


if __name__ == "__main__":
    main()
