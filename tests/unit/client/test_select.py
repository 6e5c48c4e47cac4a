"""Release selection: a pure function of the box index, this machine and the command line's choices."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import pytest

from scrollcase.client.select import (
    HostView,
    Wanted,
    is_prerelease,
    require_choice,
    select_release,
    semver_key,
)
from scrollcase.errors import HostError, UsageError
from scrollcase.store.index import BoxIndex, IndexEntry
from scrollcase.targets.evidence import FrameworkEvidence, GpuEvidence
from scrollcase.targets.hostgpu import Gpu, GpuFacts
from tests.support.targets import target_spec

TORCH_ARCHS = ["sm_50", "sm_60", "sm_70", "sm_75", "sm_80", "sm_86", "sm_90", "compute_90"]


def entry(version: str, target_id: str, *, driver: str = "550.54.14", archs: list[str] | None = None) -> IndexEntry:
    spec = target_spec(target_id)
    target = {"platform": spec.platform, "arch": spec.arch, "accelerator": spec.accelerator}
    gpu = None
    if spec.cuda_version:
        target["cudaVersion"] = spec.cuda_version
        framework = FrameworkEvidence(version="2.6.0", cuda=spec.cuda_version, archList=archs or TORCH_ARCHS)
        gpu = GpuEvidence(cudaRuntime=spec.cuda_version, source="framework", framework=framework)
    prefix = f"boxes/demo/{version}/{target_id}/demo-{version}-{target_id}"
    return IndexEntry.model_validate(
        {
            "targetId": target_id,
            "target": target,
            "archive": f"{prefix}.tar.zst",
            "release": f"{prefix}.release.json",
            "sha256Key": f"{prefix}.tar.zst.sha256",
            "sha256": "a" * 64,
            "size": 1000,
            "minNvidiaDriverVersion": driver if spec.cuda_version else None,
            "minHostAppVersion": "1.0.0",
            "minRamGb": 1,
            "gpu": gpu.model_dump() if gpu else None,
        }
    )


def index(*entries: tuple[str, str] | IndexEntry) -> BoxIndex:
    versions: dict[str, dict[str, IndexEntry]] = {}
    for item in entries:
        made = item if isinstance(item, IndexEntry) else entry(*item)
        version = made.archive.split("/")[2]
        versions.setdefault(version, {})[made.targetId] = made
    return BoxIndex(boxId="demo", versions=versions)


def gpus(*caps: str, driver: str = "550.54.14") -> GpuFacts:
    return GpuFacts(tuple(Gpu(i, driver, cap, "GPU") for i, cap in enumerate(caps)))


LINUX = HostView("linux", "x86_64")
RTX3090 = HostView("linux", "x86_64", gpus("8.6"))
OLD_DRIVER = HostView("linux", "x86_64", gpus("8.6", driver="535.104.05"))
B200 = HostView("linux", "x86_64", gpus("10.0", driver="570.86.10"))
MAC = HostView("osx", "arm64")
NO_SMI = HostView("linux", "x86_64", GpuFacts(error="nvidia-smi is not on PATH"))

CPU, CUDA, CUDA128, WIN, METAL = (
    "linux-x86_64-cpu",
    "linux-x86_64-cuda12.4",
    "linux-x86_64-cuda12.8",
    "windows-x86_64-cpu",
    "osx-arm64-metal",
)


@dataclass(frozen=True)
class Case:
    id: str
    index: BoxIndex
    host: HostView
    chosen: tuple[str, str] | None
    wanted: Wanted = field(default_factory=Wanted)


CASES = [
    Case("cpu-only machine takes the cpu box", index(("1.0.0", CPU), ("1.0.0", CUDA)), NO_SMI, ("1.0.0", CPU)),
    Case("a fitting GPU prefers cuda over cpu", index(("1.0.0", CPU), ("1.0.0", CUDA)), RTX3090, ("1.0.0", CUDA)),
    Case("newest version by semver", index(("1.2.0", CPU), ("1.10.0", CPU), ("1.9.3", CPU)), LINUX, ("1.10.0", CPU)),
    Case("a release outranks its pre-release", index(("2.0.0-rc.1", CPU), ("2.0.0", CPU)), LINUX, ("2.0.0", CPU)),
    Case("pre-releases are left out", index(("1.0.0", CPU), ("1.1.0-rc.1", CPU)), LINUX, ("1.0.0", CPU)),
    Case(
        "--pre lets them in",
        index(("1.0.0", CPU), ("1.1.0-rc.1", CPU)),
        LINUX,
        ("1.1.0-rc.1", CPU),
        Wanted(pre=True),
    ),
    Case("only pre-releases: nothing fits", index(("1.1.0-rc.1", CPU)), LINUX, None),
    Case(
        "--version names a pre-release",
        index(("1.0.0", CPU), ("1.1.0-rc.1", CPU)),
        LINUX,
        ("1.1.0-rc.1", CPU),
        Wanted(version="1.1.0-rc.1"),
    ),
    Case(
        "--version pins an older one",
        index(("1.0.0", CPU), ("2.0.0", CPU)),
        LINUX,
        ("1.0.0", CPU),
        Wanted(version="1.0.0"),
    ),
    Case(
        "--version pins a newer cpu one over an older cuda one",
        index(("1.0.0", CUDA), ("2.0.0", CPU)),
        RTX3090,
        ("2.0.0", CPU),
        Wanted(version="2.0.0"),
    ),
    Case("a linux box never fits a mac", index(("1.0.0", CPU)), MAC, None),
    Case(
        "--target passes over a newer release that fits",
        index(("2.0.0", CPU), ("1.0.0", WIN)),
        LINUX,
        ("1.0.0", WIN),
        Wanted(target=WIN[:3] + WIN[3:]),  # typed on the command line: another str object than the index's
    ),
    Case(
        "SASS over PTX comes before the newest CUDA",
        index(entry("1.0.0", CUDA, archs=["sm_90", "sm_100"]), entry("1.0.0", CUDA128, driver="570.26")),
        B200,
        ("1.0.0", CUDA),
    ),
    Case("another platform never fits", index(("1.0.0", WIN)), LINUX, None),
    Case("--target forces another platform", index(("1.0.0", WIN)), LINUX, ("1.0.0", WIN), Wanted(target=WIN)),
    Case(
        "--target cpu on a GPU machine",
        index(("1.0.0", CPU), ("1.0.0", CUDA)),
        RTX3090,
        ("1.0.0", CPU),
        Wanted(target=CPU),
    ),
    Case("an old driver falls back to cpu", index(("1.0.0", CPU), ("1.0.0", CUDA)), OLD_DRIVER, ("1.0.0", CPU)),
    Case(
        "a GPU the archList misses falls back to cpu",
        index(("1.0.0", CPU), entry("1.0.0", CUDA, archs=["sm_80", "sm_86", "sm_90"])),
        B200,
        ("1.0.0", CPU),
    ),
    Case("PTX (JIT) still fits", index(("1.0.0", CPU), ("1.0.0", CUDA)), B200, ("1.0.0", CUDA)),
    Case(
        "SASS over PTX, then the newest CUDA",
        index(("1.0.0", CUDA), entry("1.0.0", CUDA128, driver="570.26", archs=["sm_90", "sm_100", "compute_100"])),
        B200,
        ("1.0.0", CUDA128),
    ),
    Case(
        "the newest CUDA whose driver minimum is met",
        index(("1.0.0", CUDA), entry("1.0.0", CUDA128, driver="570.26")),
        RTX3090,
        ("1.0.0", CUDA),
    ),
    Case(
        "cuda of an older version beats cpu of a newer one",
        index(("1.0.0", CUDA), ("1.1.0", CPU)),
        RTX3090,
        ("1.0.0", CUDA),
    ),
    Case(
        "the newest cuda among versions",
        index(("1.0.0", CUDA), ("1.1.0", CUDA), ("1.1.0", CPU)),
        RTX3090,
        ("1.1.0", CUDA),
    ),
    Case(
        "--skip-gpu-check: cuda fits unchecked",
        index(("1.0.0", CPU), ("1.0.0", CUDA)),
        LINUX,
        ("1.0.0", CUDA),
        Wanted(skip_gpu_check=True),
    ),
    Case("metal on osx-arm64", index(("1.0.0", "osx-arm64-cpu"), ("1.0.0", METAL)), MAC, ("1.0.0", METAL)),
    Case("metal never on linux", index(("1.0.0", METAL)), LINUX, None),
    Case("an empty index", index(), LINUX, None),
]


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_selection(case: Case) -> None:
    chosen = select_release(case.index, case.host, case.wanted).chosen
    got = (chosen.version, chosen.target_id) if chosen else None
    assert got == case.chosen


def test_every_candidate_says_why_it_does_not_fit() -> None:
    idx = index(("1.0.0", CUDA), ("1.0.0", WIN), ("1.1.0-rc.1", CPU), ("1.0.0", METAL))
    selection = select_release(idx, OLD_DRIVER, Wanted())
    why = {(c.version, c.target_id): " ".join(c.reasons) for c in selection.candidates}
    assert "older than minNvidiaDriverVersion 550.54.14" in why[("1.0.0", CUDA)]
    assert "built for windows-x86_64; this machine is linux-x86_64" in why[("1.0.0", WIN)]
    assert "built for osx-arm64" in why[("1.0.0", METAL)]
    assert "a pre-release: pass --pre or --version 1.1.0-rc.1" in why[("1.1.0-rc.1", CPU)]
    with pytest.raises(HostError) as raised:
        require_choice(selection, idx, Wanted(), "store")
    assert raised.value.exit_code == 11 and len(raised.value.problems) == 4
    assert {p.key for p in raised.value.problems} == {f"{v}/{t}" for v, t in why}


def test_fitting_candidates_come_first_best_first() -> None:
    selection = select_release(
        index(("1.0.0", CPU), ("1.1.0", CPU), ("1.0.0", CUDA), ("1.0.0", WIN)), RTX3090, Wanted()
    )
    order = [(c.version, c.target_id, c.fits) for c in selection.candidates]
    assert order == [("1.0.0", CUDA, True), ("1.1.0", CPU, True), ("1.0.0", CPU, True), ("1.0.0", WIN, False)]
    assert selection.candidates[0].to_json()["gpuCheck"]["status"] == "pass"  # type: ignore[index]


def test_a_version_or_target_the_index_lacks_is_a_usage_error() -> None:
    idx = index(("1.0.0", CPU))
    for wanted, text in ((Wanted(version="9.9.9"), "no version 9.9.9"), (Wanted(target=CUDA), f"no target {CUDA}")):
        with pytest.raises(UsageError, match=text):
            require_choice(select_release(idx, LINUX, wanted), idx, wanted, "store")


def test_a_skipped_check_and_a_failed_one_are_reported() -> None:
    idx = index(("1.0.0", CUDA))
    skipped = select_release(idx, LINUX, Wanted(skip_gpu_check=True)).candidates[0]
    assert skipped.fits and skipped.gpu is not None and skipped.gpu.status == "skip"
    refused = select_release(idx, NO_SMI, Wanted()).candidates[0]
    assert not refused.fits and "nvidia-smi is not on PATH" in refused.reasons[0]


@pytest.mark.parametrize(
    "ordered",
    [
        ["1.0.0-alpha", "1.0.0-alpha.1", "1.0.0-alpha.beta", "1.0.0-beta", "1.0.0-beta.2", "1.0.0-beta.11"],
        ["1.0.0-rc.1", "1.0.0", "1.0.1", "1.2.0", "1.10.0", "2.0.0"],
        ["0.9.99", "1.0.0+build.5"],
    ],
)
def test_semver_precedence(ordered: list[str]) -> None:
    assert sorted(ordered, key=semver_key) == ordered
    assert sorted(reversed(ordered), key=semver_key) == ordered


def test_prerelease_and_build_metadata() -> None:
    assert is_prerelease("1.0.0-rc.1") and is_prerelease("1.0.0-rc.1+b")
    assert not is_prerelease("1.0.0") and not is_prerelease("1.0.0+build-5")
    assert semver_key("1.0.0+a") == semver_key("1.0.0+b")


def test_a_version_that_is_not_semver_never_fits() -> None:
    idx = index(("1.0.0", CPU))
    odd = BoxIndex(boxId="demo", versions={**idx.versions, "latest": idx.versions["1.0.0"]})
    selection = select_release(odd, LINUX, Wanted())
    assert selection.chosen is not None and selection.chosen.version == "1.0.0"
    assert [c.reasons for c in selection.candidates if c.version == "latest"] == [
        ("'latest' is not a semantic version",)
    ]


def test_the_releases_that_do_not_fit_come_newest_first() -> None:
    selection = select_release(
        index(("1.0.0", WIN), ("1.10.0", WIN), ("1.2.0", WIN), ("1.2.0", METAL)), LINUX, Wanted()
    )
    order = [(c.version, c.target_id) for c in selection.candidates]
    assert order == [("1.10.0", WIN), ("1.2.0", WIN), ("1.2.0", METAL), ("1.0.0", WIN)]


@pytest.mark.parametrize(
    ("wanted", "reported"),
    [
        (Wanted(version="1.0.0"), ["1.0.0/windows-x86_64-cpu", "1.0.0/linux-x86_64-cuda12.4"]),
        (
            Wanted(target=CUDA),
            ["2.0.0/linux-x86_64-cuda12.4", "1.0.0/linux-x86_64-cuda12.4", "0.9.0/linux-x86_64-cuda12.4"],
        ),
        (Wanted(version="1.0.0", target=CUDA), ["1.0.0/linux-x86_64-cuda12.4"]),
    ],
)
def test_when_nothing_fits_only_the_releases_asked_for_are_reported(wanted: Wanted, reported: list[str]) -> None:
    """The versions and targets on both sides of the one asked for are no news (nothing fits: no GPU, Windows)."""
    idx = index(*((v, t) for v in ("0.9.0", "1.0.0", "2.0.0") for t in (CPU, CUDA, WIN) if t != CPU or v == "2.0.0"))
    typed = Wanted(  # as typed on the command line: other str objects than the index's
        version=None if wanted.version is None else wanted.version[:1] + wanted.version[1:],
        target=None if wanted.target is None else wanted.target[:1] + wanted.target[1:],
    )
    with pytest.raises(HostError) as raised:
        require_choice(select_release(idx, NO_SMI, typed), idx, typed, "store")
    assert [p.key for p in raised.value.problems] == reported


def test_a_version_that_is_not_semver_is_reported_when_nothing_fits() -> None:
    idx = index(("1.0.0", CPU))
    odd = BoxIndex(boxId="demo", versions={"latest": idx.versions["1.0.0"]})
    with pytest.raises(HostError) as raised:
        require_choice(select_release(odd, LINUX, Wanted()), odd, Wanted(), "store")
    assert [(p.key, p.message) for p in raised.value.problems] == [
        ("latest/linux-x86_64-cpu", "'latest' is not a semantic version")
    ]


def test_a_usage_error_lists_what_the_index_has() -> None:
    idx = index(("1.10.0", CPU), ("1.2.0", CPU), ("1.2.0", WIN))
    with pytest.raises(UsageError, match=r"store has no version 9\.9\.9 of demo \(it has: 1\.2\.0, 1\.10\.0\)"):
        require_choice(select_release(idx, LINUX, Wanted(version="9.9.9")), idx, Wanted(version="9.9.9"), "store")
    wanted = Wanted(version="1.10.0", target=WIN)
    with pytest.raises(UsageError, match=f"no target {WIN} of demo 1.10.0 \\(it has: {CPU}\\)"):
        require_choice(select_release(idx, LINUX, wanted), idx, wanted, "store")
    many = index(*(("1.0.0", t) for t in (WIN, METAL, CUDA128, "osx-arm64-cpu", CUDA, CPU)))
    with pytest.raises(UsageError) as raised:
        require_choice(select_release(many, LINUX, Wanted(target="x")), many, Wanted(target="x"), "store")
    assert raised.value.message.endswith(f"(it has: {CPU}, {CUDA}, {CUDA128}, osx-arm64-cpu, {METAL}, {WIN})")
    with pytest.raises(UsageError, match=r"\(it has: none\)"):
        require_choice(select_release(index(), LINUX, Wanted(version="1.0.0")), index(), Wanted(version="1.0.0"), "s")


def test_a_candidate_says_whether_it_is_a_pre_release() -> None:
    selection = select_release(index(("1.0.0", CPU), ("1.1.0-rc.1", CPU)), LINUX, Wanted())
    assert [c.to_json()["prerelease"] for c in selection.candidates] == [False, True]


def test_selection_values_cannot_change() -> None:
    selection = select_release(index(("1.0.0", CPU)), LINUX, Wanted())
    for value, name in (
        (selection, "chosen"),
        (selection.candidates[0], "version"),
        (LINUX, "arch"),
        (Wanted(), "pre"),
    ):
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(value, name, None)


# Every test host and box above pairs platform and arch the same way; these do not (docs/install.md, rule 2:
# platform *and* arch must be this machine's).
ARM_LINUX = HostView("linux", "aarch64", gpus("9.0"))
INTEL_MAC = HostView("osx", "x86_64")
ARM_CPU, ARM_CUDA, X86_CUDA, MAC_CPU, INTEL_MAC_CPU = (
    "linux-aarch64-cpu",
    "linux-aarch64-cuda12.4",
    "linux-x86_64-cuda12.4",
    "osx-arm64-cpu",
    "osx-x86_64-cpu",
)


@pytest.mark.parametrize(
    ("host", "releases", "chosen"),
    [
        (ARM_LINUX, [CPU, CUDA], None),  # the same platform, another arch: nothing fits
        (ARM_LINUX, [CPU, ARM_CPU], ARM_CPU),
        (ARM_LINUX, [X86_CUDA, ARM_CUDA, CPU], ARM_CUDA),  # a GH200: the aarch64 CUDA box, not x86_64's
        (LINUX, [ARM_CPU, ARM_CUDA], None),
        (INTEL_MAC, [MAC_CPU, METAL], None),  # osx-arm64 boxes never fit an Intel mac
        (INTEL_MAC, [MAC_CPU, INTEL_MAC_CPU], INTEL_MAC_CPU),
        (MAC, [INTEL_MAC_CPU], None),
        (HostView("windows", "x86_64"), [CPU], None),  # another platform, the same arch
    ],
    ids=[
        "arm-linux-x86-boxes",
        "arm-linux-arm-cpu",
        "arm-linux-arm-cuda",
        "x86-arm-boxes",
        "intel-mac-arm-boxes",
        "intel-mac-own-box",
        "arm-mac-intel-box",
        "windows-linux-box",
    ],
)
def test_platform_and_arch_must_both_be_this_machines(host: HostView, releases: list[str], chosen: str | None) -> None:
    idx = index(*(("1.0.0", r) for r in releases))
    selection = select_release(idx, host, Wanted())
    assert (selection.chosen.target_id if selection.chosen else None) == chosen
    here = f"{host.platform}-{host.arch}"
    for candidate in selection.candidates:
        built = "-".join(candidate.target_id.split("-")[:2])
        if built != here:
            assert f"built for {built}; this machine is {here}" in candidate.reasons


def test_target_skips_the_platform_rule_but_not_the_gpu_check() -> None:
    """--target installs as `unpack` would: another arch is allowed, the GPU check still runs."""
    forced = select_release(index(("1.0.0", ARM_CPU)), LINUX, Wanted(target=ARM_CPU))
    assert forced.chosen is not None and forced.chosen.target_id == ARM_CPU
    no_gpu = select_release(index(("1.0.0", CUDA)), NO_SMI, Wanted(target=CUDA))
    assert no_gpu.chosen is None
    (candidate,) = no_gpu.candidates
    assert candidate.gpu is not None and candidate.gpu.status == "fail"
    assert any("needs an NVIDIA GPU" in reason for reason in candidate.reasons)
