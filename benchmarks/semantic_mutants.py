"""Semantic mutants: hand-written, reviewable bugs in the rules that decide something for a user.

``benchmarks/mutation.py`` (cosmic-ray) measures operator-level edits (``<`` for ``<=``, a constant
changed).  The edits a plausible future change makes to a rule are different: a comparison made at the
wrong precision (a CUDA major where major.minor is the contract), a check skipped on one path (the
download cache), a rule applied to one accelerator only, a path not taken (relocating to the staging
folder).  Each mutant here is one such edit: an ``id``, the ``room`` (the module's job), the ``file``,
the exact source text it replaces (anchored on text, not line numbers, so it survives code moving; a
snippet found nowhere, or more than once, is reported as an error, never skipped), its replacement, a
one-line description of the bug, and the tests that should kill it.

Each mutant is applied to a throwaway copy of ``scrollcase/`` and ``tests/`` (never the working tree:
other work may be under way there), its tests run with a timeout (a run past it counts as killed, as
cosmic-ray counts a loop), and the file is restored.  Before the mutants, each distinct test set runs
once unmutated in the copy: a set that fails there makes its mutants errors, not kills.  Run:

    python benchmarks/semantic_mutants.py                 # every mutant (~5-10 min on 2 busy cores)
    python benchmarks/semantic_mutants.py --room gpucheck # one room
    python benchmarks/semantic_mutants.py --only gpu-unknown-refused
    python benchmarks/semantic_mutants.py --list          # the set, without running it
    python benchmarks/semantic_mutants.py --check         # every anchor found exactly once (no tests run)

Exit status: 0 when every mutant was killed or the kill rate is at least ``--target`` (95%) with no
errors; 1 otherwise.  ``--json FILE`` writes each mutant's outcome.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
COPIED = ("scrollcase", "tests", "recipes", "actions", "pyproject.toml", "docs", "README.md")
TIMEOUT = 300.0


@dataclass(frozen=True)
class Mutant:
    id: str
    room: str
    file: str
    find: str
    replace: str
    why: str
    tests: tuple[str, ...]


SELECT = ("tests/unit/client/test_select.py",)
GPU = ("tests/unit/targets/test_gpucheck.py",)
EVIDENCE = ("tests/unit/targets/test_evidence.py",)
SELFTEST = ("tests/unit/build/test_selftest.py",)
RECIPE = ("tests/unit/recipe/test_rules.py", "tests/unit/recipe/test_loader.py")
PIXI = ("tests/unit/lock/test_rules.py",)
LOCKCHECK = ("tests/unit/lock/test_check.py",)
RELOCATE = ("tests/unit/format/test_relocate.py", "tests/unit/format/test_relocate_mutations.py")
UNPACK = ("tests/unit/format/archive/test_unpack.py", "tests/unit/format/test_paths.py")
INDEX = ("tests/unit/store/test_index.py",)
LOCAL = ("tests/unit/store/test_local.py",)
FRAMECACHE = ("tests/unit/client/test_framecache.py",)
UPGRADE = ("tests/unit/client/test_upgrade.py",)
RECEIVE = ("tests/unit/client/test_receive.py",)
VERIFY = ("tests/unit/build/test_verify.py", "tests/unit/format/test_receipt.py")
SHARE = ("tests/unit/client/test_share.py", "tests/unit/io/test_cache.py")

MUTANTS: tuple[Mutant, ...] = (
    # ------------------------------------------------------------------ selection
    Mutant(
        "sel-platform-only",
        "selection",
        "scrollcase/client/select.py",
        "elif (target.platform, target.arch) != (host.platform, host.arch):",
        "elif target.platform != host.platform:",
        "a release of another arch of the same platform (linux-x86_64 on linux-aarch64) fits",
        SELECT,
    ),
    Mutant(
        "sel-arch-only",
        "selection",
        "scrollcase/client/select.py",
        "elif (target.platform, target.arch) != (host.platform, host.arch):",
        "elif target.arch != host.arch:",
        "a release of another platform with the same arch (windows-x86_64 on linux-x86_64) fits",
        SELECT,
    ),
    Mutant(
        "sel-version-before-accelerator",
        "selection",
        "scrollcase/client/select.py",
        "return spec.kind.rank, semver_key(candidate.version), gpu, cuda",
        "return semver_key(candidate.version), spec.kind.rank, gpu, cuda",
        "a newer cpu release outranks the cuda one still being published: a GPU machine gets a CPU install",
        SELECT,
    ),
    Mutant(
        "sel-cuda-before-sass",
        "selection",
        "scrollcase/client/select.py",
        "return spec.kind.rank, semver_key(candidate.version), gpu, cuda",
        "return spec.kind.rank, semver_key(candidate.version), cuda, gpu",
        "the newest CUDA is preferred over a box with SASS for this GPU (a slow JIT start)",
        SELECT,
    ),
    Mutant(
        "sel-version-pin-blocks-pre",
        "selection",
        "scrollcase/client/select.py",
        "elif wanted.version is None and is_prerelease(version) and not wanted.pre:",
        "elif is_prerelease(version) and not wanted.pre:",
        "--version naming a pre-release still needs --pre",
        SELECT,
    ),
    Mutant(
        "sel-semver-lexical",
        "selection",
        "scrollcase/client/select.py",
        'numbers = tuple(int(part) for part in core.split("."))',
        'numbers = tuple(part for part in core.split("."))  # type: ignore[misc]',
        "versions compared as text: 1.9.3 outranks 1.10.0",
        SELECT,
    ),
    Mutant(
        "sel-target-skips-gpu-check",
        "selection",
        "scrollcase/client/select.py",
        "    if wanted.skip_gpu_check:\n",
        "    if wanted.skip_gpu_check or wanted.target is not None:\n",
        "--target installs a CUDA box without the GPU check the docs promise",
        SELECT,
    ),
    # ------------------------------------------------------------------ gpucheck
    Mutant(
        "gpu-family-as-arch-specific",
        "gpucheck",
        "scrollcase/targets/gpucheck.py",
        'if self.suffix not in ("", "f"):',
        "if self.suffix:",
        "a family-specific sm_100f runs only on exactly 10.0 (refused on a 10.3 GPU it runs on)",
        GPU,
    ),
    Mutant(
        "gpu-family-ptx-any-newer",
        "gpucheck",
        "scrollcase/targets/gpucheck.py",
        "if self.ptx and not self.suffix:",
        "if self.ptx:",
        "family-specific PTX compute_100f accepted on any newer GPU (12.0), outside its family",
        GPU,
    ),
    Mutant(
        "gpu-ptx-major-only",
        "gpucheck",
        "scrollcase/targets/gpucheck.py",
        "return (self.major, self.minor) <= cap",
        "return self.major <= cap[0]",
        "PTX compared at major precision: compute_86 accepted on an 8.0 GPU it cannot JIT for",
        GPU,
    ),
    Mutant(
        "gpu-sass-minor-ignored",
        "gpucheck",
        "scrollcase/targets/gpucheck.py",
        "return self.major == cap[0] and self.minor <= cap[1]",
        "return self.major == cap[0]",
        "SASS sm_86 accepted on an 8.0 GPU",
        GPU,
    ),
    Mutant(
        "gpu-unknown-refused",
        "gpucheck",
        "scrollcase/targets/gpucheck.py",
        "if cannot and not can and not unknown:",
        "if cannot and not can:",
        "a host with a GPU that cannot and one of unknown capability is refused (the unknown one may run it)",
        GPU,
    ),
    Mutant(
        "gpu-any-cannot-refuses",
        "gpucheck",
        "scrollcase/targets/gpucheck.py",
        "if cannot and not can and not unknown:",
        "if cannot and not unknown:",
        "one GPU that cannot run the box refuses a machine whose other GPU can",
        GPU,
    ),
    Mutant(
        "gpu-first-gpus-driver",
        "gpucheck",
        "scrollcase/targets/gpucheck.py",
        "driver = min((g.driver_version for g in gpus), key=dotted_key)",
        "driver = gpus[0].driver_version",
        "only the first GPU's driver is checked: an older driver listed later passes",
        GPU,
    ),
    Mutant(
        "gpu-oldest-sass",
        "gpucheck",
        "scrollcase/targets/gpucheck.py",
        "newest = sorted(archs, key=lambda a: (a.major, a.minor), reverse=True)",
        "newest = sorted(archs, key=lambda a: (a.major, a.minor))",
        "the oldest matching SASS is reported (sm_80 on an 8.6 GPU that has sm_86)",
        GPU,
    ),
    Mutant(
        "gpu-ptx-before-sass",
        "gpucheck",
        "scrollcase/targets/gpucheck.py",
        '    if sass:\n        return GpuVerdict(gpu, "sass", sass[0].text)\n',
        '    if sass and not ptx:\n        return GpuVerdict(gpu, "sass", sass[0].text)\n',
        "a GPU with matching SASS is said to JIT the PTX (a false slow-start warning, SASS ranked as PTX)",
        GPU,
    ),
    # ------------------------------------------------------------------ evidence
    Mutant(
        "ev-major-precision",
        "evidence",
        "scrollcase/targets/evidence.py",
        "        if evidence.cudaRuntime != want:\n",
        '        if (evidence.cudaRuntime or "").split(".")[0] != (want or "").split(".")[0]:\n',
        "a torch built for CUDA 12.1 passes as a cuda12.4 box (only the major compared)",
        EVIDENCE,
    ),
    Mutant(
        "ev-several-runtimes-major",
        "evidence",
        "scrollcase/targets/evidence.py",
        "if fw is None and len(runtimes) > 1:",
        'if fw is None and len({r.split(".")[0] for r in runtimes}) > 1:',
        "runtime files of CUDA 12.1 and 12.4 in one box pass (several runtimes compared by major)",
        EVIDENCE,
    ),
    Mutant(
        "ev-cpu-target-files-ignored",
        "evidence",
        "scrollcase/targets/evidence.py",
        "    if evidence.cudaRuntime is not None:\n        return [\n",
        "    if fw is not None and evidence.cudaRuntime is not None:\n        return [\n",
        "a cpu box that ships CUDA runtime files (no torch) passes",
        EVIDENCE,
    ),
    Mutant(
        "ev-cpu-torch-passes",
        "evidence",
        "scrollcase/targets/evidence.py",
        "if fw is not None and fw.cuda is None:",
        "if fw is not None and fw.cuda is None and not evidence.runtimePackages:",
        "a CPU torch beside CUDA runtime wheels passes as a CUDA box",
        EVIDENCE,
    ),
    # ------------------------------------------------------------------ selftest
    Mutant(
        "st-signal-passes",
        "selftest",
        "scrollcase/build/selftest.py",
        "    if not run.ok:\n",
        "    if run.returncode is not None and run.returncode > 0:\n",
        "a check killed by a signal (a segfaulting import torch: returncode -11) passes",
        SELFTEST,
    ),
    Mutant(
        "st-env-dropped",
        "selftest",
        "scrollcase/build/selftest.py",
        "run = runner(python, check.args, env=env, timeout=timeout, cwd=box_root)",
        "run = runner(python, check.args, env={}, timeout=timeout, cwd=box_root)",
        "checks run without SCROLLCASE_BOX_ROOT/MODEL_CACHE (and CUDA_VISIBLE_DEVICES): pythonCode sees another box",
        SELFTEST,
    ),
    Mutant(
        "st-prefix-unchecked",
        "selftest",
        "scrollcase/build/selftest.py",
        "if _real(prefix) != _real(env_dir):",
        "if not _real(prefix).is_dir():",
        "a host interpreter answering for the box (another sys.prefix) passes the entry-point check",
        SELFTEST,
    ),
    Mutant(
        "st-any-on-demand-skips-all",
        "selftest",
        "scrollcase/build/selftest.py",
        "skip=absent if path in not_in_box else None,",
        "skip=absent if not_in_box else None,",
        "one on-demand asset skips every file check",
        SELFTEST,
    ),
    Mutant(
        "st-stop-at-first",
        "selftest",
        "scrollcase/build/selftest.py",
        "        results.append(CheckResult(check, run, judge(check, run, env_dir)))\n",
        "        results.append(CheckResult(check, run, judge(check, run, env_dir)))\n"
        "        if results[-1].problem:\n            break\n",
        "the first failed check hides the others (the report lists one problem of several)",
        SELFTEST,
    ),
    # ------------------------------------------------------------------ recipe rules
    Mutant(
        "rr-driver-cpu-only",
        "recipe rules",
        "scrollcase/recipe/rules.py",
        "if target and not target.kind.uses_gpu and driver is not None:",
        'if target and target.accelerator == "cpu" and driver is not None:',
        "minNvidiaDriverVersion on a metal recipe passes",
        RECIPE,
    ),
    Mutant(
        "rr-cudaversion-cpu-only",
        "recipe rules",
        "scrollcase/recipe/rules.py",
        "if owner != accel and value is not None:",
        'if accel == "cpu" and value is not None:',
        "cudaVersion on a metal target passes",
        RECIPE,
    ),
    Mutant(
        "rr-parity-cuda-only",
        "recipe rules",
        "scrollcase/recipe/rules.py",
        "if target.accelerator not in accels:",
        "if target.is_cuda and target.accelerator not in accels:",
        "a metal recipe whose parity never runs on metal passes",
        RECIPE,
    ),
    Mutant(
        "rr-duplicate-path-unchecked",
        "recipe rules",
        "scrollcase/recipe/rules.py",
        '    out += _duplicates(raw.get("assets"), "path", ("assets",), "asset path")\n',
        "",
        "two assets written to the same path pass (the second overwrites the first in the box)",
        RECIPE,
    ),
    Mutant(
        "rr-accelerator-availability-cuda-only",
        "recipe rules",
        "scrollcase/recipe/rules.py",
        "    if accel not in allowed:\n",
        '    if accel == "cuda" and accel not in allowed:\n',
        "metal on linux (or windows) passes as a target",
        RECIPE,
    ),
    Mutant(
        "rr-parity-platform-unchecked",
        "recipe rules",
        "scrollcase/recipe/rules.py",
        "if registry.known(acc) and acc not in allowed",
        'if acc == "cuda" and acc not in allowed',
        "parity on metal for a linux target passes",
        RECIPE,
    ),
    Mutant(
        "rr-exe-windows-unchecked",
        "recipe rules",
        "scrollcase/recipe/rules.py",
        "    if not target.is_windows and exe:\n",
        '    if target.platform == "linux" and exe:\n',
        "a python.exe entry point on a macOS target passes",
        RECIPE,
    ),
    # ------------------------------------------------------------------ pixi rules
    Mutant(
        "px-cuda-major-precision",
        "pixi rules",
        "scrollcase/targets/cuda.py",
        'elif _major_minor_of(declared) != cuda or declared.count(".") > 1:',
        'elif declared.split(".")[0] != cuda.split(".")[0]:',
        "system-requirements cuda = 12.1 passes for a cuda12.4 recipe",
        PIXI,
    ),
    Mutant(
        "px-cuda-pin-prefix",
        "pixi rules",
        "scrollcase/targets/cuda.py",
        'if not re.fullmatch(rf"(==|=)?{re.escape(cuda)}(\\.\\*)?", (pin.version or "").replace(" ", "")):',
        'if not re.match(rf"(==|=)?{re.escape(cuda)}", (pin.version or "").replace(" ", "")):',
        'cuda-version = "12.4.*" and "12.41" or ">=12.4" treated alike (a prefix match)',
        PIXI,
    ),
    Mutant(
        "px-torch-unpinned-build",
        "pixi rules",
        "scrollcase/targets/cuda.py",
        'if not (torch.build or "").startswith("cuda"):',
        'if torch.build is not None and not torch.build.startswith("cuda"):',
        "a conda pytorch without a build pin on a CUDA recipe passes (the solver may pick the cpu build)",
        PIXI,
    ),
    Mutant(
        "px-pypi-cpu-target-cuda-index",
        "pixi rules",
        "scrollcase/targets/cpu.py",
        'if torch.index.rstrip("/").rsplit("/", 1)[-1].startswith("cu"):',
        "if False:",
        "a cpu recipe taking torch from the cu124 index passes",
        PIXI,
    ),
    # ------------------------------------------------------------------ lock-check
    Mutant(
        "lc-cuda-version-major",
        "lock-check",
        "scrollcase/targets/cuda.py",
        "    if major_minor(record.version) != cuda:\n",
        '    if record.version.split(".")[0] != cuda.split(".")[0]:\n',
        "a lock with cuda-version 12.1 passes for a cuda12.4 recipe",
        LOCKCHECK,
    ),
    Mutant(
        "lc-conda-torch-other-cuda",
        "lock-check",
        "scrollcase/targets/cuda.py",
        '    if torch.accelerator != f"cuda{cuda}":\n        found = "a CPU build" if torch.accelerator == "cpu"',
        '    if torch.accelerator == "cpu":\n        found = "a CPU build" if torch.accelerator == "cpu"',
        "a conda torch built for another CUDA passes (only a CPU build is refused)",
        LOCKCHECK,
    ),
    Mutant(
        "lc-runtime-wheel-major",
        "lock-check",
        "scrollcase/targets/cuda.py",
        'if versions and versions != {cuda} and torch.accelerator == f"cuda{cuda}":',
        'if versions and {v.split(".")[0] for v in versions} != {cuda.split(".")[0]}'
        ' and torch.accelerator == f"cuda{cuda}":',
        "CUDA 12.1 runtime wheels beside a cu124 torch pass",
        LOCKCHECK,
    ),
    Mutant(
        "lc-pixi-reads-strict",
        "lock-check",
        "scrollcase/lock/check.py",
        "    return parts >= needed\n",
        "    return parts > needed\n",
        "the first pixi release that reads a lock format is said not to",
        LOCKCHECK,
    ),
    # ------------------------------------------------------------------ relocation
    Mutant(
        "rl-binary-longer-prefix",
        "relocation",
        "scrollcase/format/relocate.py",
        "    if len(new_prefix) > len(placeholder):\n",
        "    if len(new_prefix) > len(placeholder) + 8:\n",
        "a DEST longer than the placeholder is written into binaries (shifts every offset after it)",
        RELOCATE,
    ),
    Mutant(
        "rl-follows-symlinks",
        "relocation",
        "scrollcase/format/relocate.py",
        "if path.is_symlink() or not path.is_file() or os.path.commonpath(",
        "if not path.is_file() or os.path.commonpath(",
        "a listed file that is a symlink is rewritten through the link",
        RELOCATE,
    ),
    Mutant(
        "rl-shebang-blanks",
        "relocation",
        "scrollcase/format/relocate.py",
        "if len(new_line) <= MAX_SHEBANG and not _BLANKS.search(new_prefix):",
        "if len(new_line) <= MAX_SHEBANG:",
        "a DEST with a space is written into a shebang (the kernel splits it there)",
        RELOCATE,
    ),
    Mutant(
        "rl-dest-limit-off-by-one",
        "relocation",
        "scrollcase/format/relocate.py",
        "if limit is None or size <= limit:",
        "if limit is None or size <= limit + 1:",
        "a DEST one byte over the longest the box allows is accepted",
        RELOCATE,
    ),
    # ------------------------------------------------------------------ unpack safety
    Mutant(
        "up-dotdot-leading-only",
        "unpack safety",
        "scrollcase/format/paths.py",
        '    if ".." in parts:\n',
        '    if parts[:1] == [".."]:\n',
        "a member a/../../x escapes DEST (only a leading .. refused)",
        UNPACK,
    ),
    Mutant(
        "up-link-backslash-absolute",
        "unpack safety",
        "scrollcase/format/paths.py",
        'if target.startswith(("/", "\\\\")) or _DRIVE.match(target):',
        'if target.startswith("/"):',
        "a symlink to C:\\\\x or \\\\x passes (absolute on Windows)",
        UNPACK,
    ),
    Mutant(
        "up-fifo-allowed",
        "unpack safety",
        "scrollcase/format/archive/extract.py",
        'if header.kind in ("device", "fifo") or header.kind.startswith("other"):',
        'if header.kind == "device":',
        "a fifo or unknown member type is extracted",
        UNPACK,
    ),
    Mutant(
        "up-hardlink-any-earlier",
        "unpack safety",
        "scrollcase/format/archive/extract.py",
        'if self.kinds.get(source) != "file":',
        "if source not in self.kinds:",
        "a hardlink to a directory or symlink of the archive is made",
        UNPACK,
    ),
    Mutant(
        "up-duplicate-allowed",
        "unpack safety",
        "scrollcase/format/archive/extract.py",
        'if previous is not None and not (previous == "implicit" and header.kind == "dir"):',
        'if previous is not None and previous == "dir" and header.kind == "dir":',
        "a member name seen twice overwrites the first (a file replaced by a symlink)",
        UNPACK,
    ),
    Mutant(
        "up-digest-after-tar-error",
        "unpack safety",
        "scrollcase/format/archive/unpack.py",
        "    if expected_sha256 is not None and feed.sha256 != expected_sha256:\n",
        "    if failure is None and expected_sha256 is not None and feed.sha256 != expected_sha256:\n",
        "a tampered archive is reported as unsafe/corrupt tar instead of as the wrong bytes",
        UNPACK,
    ),
    # ------------------------------------------------------------------ publish / index
    Mutant(
        "ix-conflict-on-digest-only",
        "publish/index",
        "scrollcase/store/index.py",
        "    if existing == entry:\n        return None\n",
        "    if existing is not None and existing.sha256 == entry.sha256:\n        return None\n",
        "an index entry that differs in any field but the archive digest is kept silently (no conflict)",
        INDEX,
    ),
    Mutant(
        "ix-conflict-replaced",
        "publish/index",
        "scrollcase/store/index.py",
        "    if existing is not None:\n        raise ConflictError(",
        "    if existing is not None and existing.size != entry.size:\n        raise ConflictError(",
        "a different entry of the same size silently replaces the published one",
        INDEX,
    ),
    Mutant(
        "ix-other-box-index",
        "publish/index",
        "scrollcase/store/index.py",
        "    if index.boxId != box_id:\n",
        "    if not index.boxId:\n",
        "the index of another box, lying in this box's folder, is used",
        INDEX,
    ),
    Mutant(
        "pb-etag-unchecked",
        "publish/index",
        "scrollcase/store/local.py",
        "if current is None or sha256_bytes(current) != if_match:",
        "if current is None:",
        "an index changed by a concurrent publish is overwritten (its entries lost)",
        LOCAL,
    ),
    Mutant(
        "pb-assembled-size-only",
        "publish/index",
        "scrollcase/store/local.py",
        "if (sha, size) != (upload.sha256, upload.size):",
        "if size != upload.size:",
        "an archive assembled from earlier frames is published without its sha256 checked",
        LOCAL,
    ),
    Mutant(
        "pb-overwrite",
        "publish/index",
        "scrollcase/store/local.py",
        '            if write.get("if_none_match"):\n                _create_exclusive(temp, target, key)\n',
        "            if False:\n                _create_exclusive(temp, target, key)\n",
        "a create-only write replaces an existing object with different bytes",
        LOCAL,
    ),
    # ------------------------------------------------------------------ framecache
    Mutant(
        "fc-frame-size-only",
        "framecache",
        "scrollcase/client/framecache.py",
        "if size != frame.size or sha256 != frame.sha256:",
        "if size != frame.size:",
        "a frame of the right size but other bytes enters the cache",
        FRAMECACHE,
    ),
    Mutant(
        "fc-dead-pin-keeps",
        "framecache",
        "scrollcase/io/cache.py",
        "if pin is None or not Path(pin.dest).is_dir():",
        "if pin is None:",
        "frames pinned by a removed install are kept forever",
        FRAMECACHE,
    ),
    Mutant(
        "fc-no-grace",
        "framecache",
        "scrollcase/io/cache.py",
        "return self._remove_older(folder, now - self.keep.grace_seconds, kept)",
        "return self._remove_older(folder, now, kept)",
        "a prune removes the frames a running install has just written",
        FRAMECACHE,
    ),
    # ------------------------------------------------------------------ install / receive
    Mutant(
        "rc-cached-no-identity",
        "install",
        "scrollcase/client/receive.py",
        "    check_identity(manifest, download.path)\n    bar = meter(",
        "    bar = meter(",
        "an archive already in the download cache is unpacked without box.json's identity checked",
        RECEIVE,
    ),
    Mutant(
        "rc-follow-no-identity",
        "install",
        "scrollcase/client/receive.py",
        "    check_identity(manifest, download.path)\n    if info.frames:",
        "    if info.frames:",
        "a downloaded archive is unpacked without box.json's identity checked",
        RECEIVE,
    ),
    Mutant(
        "rc-ctrl-c-keeps-downloading",
        "install",
        "scrollcase/client/receive.py",
        "            cancel.set()  # Ctrl-C: the download stops at its next chunk, its partial file kept\n",
        "            pass\n",
        "Ctrl-C during a receive waits for the whole download to finish",
        RECEIVE,
    ),
    # ------------------------------------------------------------------ upgrade
    Mutant(
        "ug-relocate-to-staging",
        "upgrade",
        "scrollcase/client/receive.py",
        "            relocate_to=relocate_to,\n",
        "            relocate_to=staging,\n",
        "the upgraded tree is relocated to the staging folder, which is renamed away (scripts point nowhere)",
        UPGRADE,
    ),
    Mutant(
        "ug-identity-skipped",
        "upgrade",
        "scrollcase/client/receive.py",
        "    check_identity(manifest, entry)\n    stream = FrameStream(",
        "    stream = FrameStream(",
        "an upgrade unpacks frames whose box.json names another release",
        UPGRADE,
    ),
    Mutant(
        "ug-previous-always-kept",
        "upgrade",
        "scrollcase/client/upgrade.py",
        "    if keep_previous:\n        return sib.previous\n",
        "    if True:\n        return sib.previous\n",
        "every upgrade keeps the old tree (twice the disk, forever)",
        UPGRADE,
    ),
    # ------------------------------------------------------------------ verify
    Mutant(
        "vf-sbom-presence-only",
        "verify",
        "scrollcase/format/soundness.py",
        "    if (sbom.size, sbom.sha256) == (recorded.size, recorded.sha256):\n",
        "    if True:\n",
        "an SBOM changed after the build passes verify",
        VERIFY,
    ),
    Mutant(
        "vf-bundled-asset-folder",
        "verify",
        "scrollcase/build/verify.py",
        "if asset.bundled and not (box_root / box.modelCacheSubdir / asset.path).is_file():",
        "if asset.bundled and not (box_root / box.modelCacheSubdir).is_dir():",
        "a bundled asset missing from the box passes (only its folder checked)",
        VERIFY,
    ),
    Mutant(
        "vf-changed-unreported",
        "verify",
        "scrollcase/format/receipt.py",
        "        elif want != have:\n",
        "        elif want != have and len(want) != len(have):\n",
        "an installed file whose bytes changed is not reported by verify --installed",
        VERIFY,
    ),
    Mutant(
        "vf-interpreter-not-executable",
        "verify",
        "scrollcase/build/verify.py",
        "if not windows and not os.access(python, os.X_OK):",
        "if windows and not os.access(python, os.X_OK):",
        "a box whose interpreter lost its executable bit passes verify",
        VERIFY,
    ),
    # ------------------------------------------------------------------ shared files (#33)
    Mutant(
        "sh-relocated-shared",
        "share",
        "scrollcase/client/share.py",
        "    relocated = {item.path for item in box.relocation.files}\n",
        "    relocated: set[str] = set()\n",
        "relocated files, whose bytes depend on DEST, are linked between boxes",
        SHARE,
    ),
    Mutant(
        "sh-entry-unchecked",
        "share",
        "scrollcase/client/share.py",
        "self.checked[step.sha256] = self.digests.get(entry) == (step.sha256, step.size)",
        "self.checked[step.sha256] = True",
        "a store entry edited in place in one box is linked into the next box",
        SHARE,
    ),
    Mutant(
        "sh-adopt-unchecked",
        "share",
        "scrollcase/client/share.py",
        "if self.digests.get(source) != (step.sha256, step.size):",
        "if False:",
        "a file whose bytes are not box.json's sha256 enters the store under that sha256",
        SHARE,
    ),
    Mutant(
        "sh-mode-ignored",
        "share",
        "scrollcase/client/share.py",
        "if entry.mode == have.mode and entry.size == size:",
        "if entry.size == size:",
        "a hard link to a copy with another mode changes the file's mode",
        SHARE,
    ),
    Mutant(
        "sh-prune-linked",
        "share",
        "scrollcase/io/cache.py",
        " | (self.linked_entries(folder) if self.keep.linked else set())",
        "",
        "cache prune removes a shared file a box still hard-links (its pin lost)",
        SHARE,
    ),
)


@dataclass(frozen=True)
class Outcome:
    mutant: Mutant
    status: str  # killed | survived | timeout | error
    seconds: float
    detail: str = ""

    @property
    def killed(self) -> bool:
        return self.status in ("killed", "timeout")


def anchor_error(mutant: Mutant, root: Path = REPO) -> str | None:
    """Why the mutant cannot be applied (its snippet found nowhere or more than once), or None."""
    path = root / mutant.file
    if not path.is_file():
        return f"{mutant.file} does not exist"
    count = path.read_text(encoding="utf-8").count(mutant.find)
    if count != 1:
        return f"snippet found {count} times in {mutant.file} (expected once): {mutant.find.strip()[:80]!r}"
    missing = [t for t in mutant.tests if not (root / t).is_file()]
    return f"test file missing: {', '.join(missing)}" if missing else None


def copy_tree(work: Path) -> None:
    for name in COPIED:
        source = REPO / name
        if source.is_dir():
            shutil.copytree(source, work / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        elif source.is_file():
            shutil.copy2(source, work / name)


def tests_at(work: Path, rev: str) -> None:
    """Replace the copy's tests/ with commit ``rev``'s (the package stays the working tree's)."""
    shutil.rmtree(work / "tests")
    archive = subprocess.run(["git", "archive", rev, "tests"], cwd=REPO, capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(work)], input=archive, check=True)


def run_tests(work: Path, tests: Sequence[str], timeout: float) -> tuple[str, float, str]:
    """('passed'|'failed'|'timeout', seconds, the tail of the output) of the tests in the copy ``work``."""
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1", "PYTHONPATH": str(work)}
    argv = [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:randomly", "-p", "no:cacheprovider", *tests]
    start = time.monotonic()
    try:
        done = subprocess.run(argv, cwd=work, env=env, capture_output=True, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        return "timeout", time.monotonic() - start, ""
    tail = "\n".join((done.stdout + done.stderr).strip().splitlines()[-3:])
    return ("passed" if done.returncode == 0 else "failed"), time.monotonic() - start, tail


def run_mutant(work: Path, mutant: Mutant, timeout: float) -> Outcome:
    error = anchor_error(mutant, work)
    if error:
        return Outcome(mutant, "error", 0.0, error)
    path = work / mutant.file
    original = path.read_text(encoding="utf-8")
    path.write_text(original.replace(mutant.find, mutant.replace, 1), encoding="utf-8")
    try:
        result, seconds, tail = run_tests(work, mutant.tests, timeout)
    finally:
        path.write_text(original, encoding="utf-8")
    status = {"passed": "survived", "failed": "killed", "timeout": "timeout"}[result]
    return Outcome(mutant, status, seconds, tail if status == "killed" else "")


def baselines(work: Path, mutants: Iterable[Mutant], timeout: float) -> dict[tuple[str, ...], str]:
    """Each distinct test set run unmutated: '' when it passes, else why it cannot judge a mutant."""
    found: dict[tuple[str, ...], str] = {}
    for tests in dict.fromkeys(m.tests for m in mutants):
        result, seconds, tail = run_tests(work, tests, timeout)
        found[tests] = "" if result == "passed" else f"the unmutated tests {result}: {tail}"
        print(f"baseline {' '.join(tests)}: {result} ({seconds:.1f} s)", flush=True)
    return found


def report(outcomes: Sequence[Outcome]) -> str:
    rooms: dict[str, list[Outcome]] = {}
    for o in outcomes:
        rooms.setdefault(o.mutant.room, []).append(o)
    lines = [
        "| room | mutants | killed | survived | errors | kill rate |",
        "| --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for room, found in [*rooms.items(), ("all", list(outcomes))]:
        killed = sum(o.killed for o in found)
        errors = sum(o.status == "error" for o in found)
        survived = sum(o.status == "survived" for o in found)
        judged = killed + survived
        rate = f"{100 * killed / judged:.0f}%" if judged else "-"
        name = f"**{room}**" if room == "all" else room
        lines.append(f"| {name} | {len(found)} | {killed} | {survived} | {errors} | {rate} |")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--room", action="append", help="the mutants of this room (repeatable)")
    parser.add_argument("--only", action="append", help="this mutant (repeatable; adds to --room)")
    parser.add_argument("--list", action="store_true", help="print the mutants and exit")
    parser.add_argument("--check", action="store_true", help="check every anchor, run no tests")
    parser.add_argument("--timeout", type=float, default=TIMEOUT, help="seconds per test run (default 300)")
    parser.add_argument("--target", type=float, default=95.0, help="the kill rate to reach, in percent")
    parser.add_argument("--json", type=Path, help="write each outcome to this file")
    parser.add_argument(
        "--tests-at", metavar="REV", help="judge with tests/ as git commit REV had it (what an older suite caught)"
    )
    args = parser.parse_args(argv)
    named = bool(args.room or args.only)  # --room and --only add up: every mutant of a room, and each id
    chosen = [m for m in MUTANTS if not named or m.room in (args.room or ()) or m.id in (args.only or ())]
    ids = [m.id for m in MUTANTS]
    if len(set(ids)) != len(ids):
        print("error: duplicate mutant ids", file=sys.stderr)
        return 1
    if not chosen:
        print("error: no mutant matches --room/--only", file=sys.stderr)
        return 1
    if args.list or args.check:
        bad = 0
        for m in chosen:
            error = anchor_error(m)
            bad += error is not None
            if args.list:
                print(f"{m.id:40} {m.room:14} {m.file}\n    {m.why}\n    kill: {' '.join(m.tests)}")
            if error:
                print(f"error: {m.id}: {error}")
        print(f"{len(chosen)} mutants, {bad} with an anchor error")
        return 1 if bad else 0
    return _run(chosen, args)


def _run(chosen: Sequence[Mutant], args: argparse.Namespace) -> int:
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="scrollcase-semantic-") as tmp:
        work = Path(tmp)
        copy_tree(work)
        if args.tests_at:
            tests_at(work, args.tests_at)
        base = baselines(work, chosen, args.timeout)
        outcomes = []
        for m in chosen:
            broken = base[m.tests]  # the unmutated tests failed: they cannot judge a mutant
            outcome = Outcome(m, "error", 0.0, broken) if broken else run_mutant(work, m, args.timeout)
            outcomes.append(outcome)
            print(f"{outcome.status:8} {m.room:14} {m.id} ({outcome.seconds:.1f} s)", flush=True)
            if outcome.status in ("survived", "error"):
                print(f"    {m.why}\n    {outcome.detail}".rstrip(), flush=True)
    print()
    print(report(outcomes))
    killed = sum(o.killed for o in outcomes)
    judged = sum(o.status != "error" for o in outcomes)
    errors = len(outcomes) - judged
    rate = 100 * killed / judged if judged else 0.0
    print(f"\n{killed} of {judged} killed ({rate:.1f}%), {errors} errors, {time.monotonic() - started:.0f} s")
    if args.json:
        data = [
            {"id": o.mutant.id, "room": o.mutant.room, "status": o.status, "seconds": round(o.seconds, 1)}
            for o in outcomes
        ]
        args.json.write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
    return 0 if not errors and rate >= args.target else 1


if __name__ == "__main__":
    sys.exit(main())
