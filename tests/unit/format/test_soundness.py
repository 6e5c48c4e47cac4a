"""format/soundness.py: every rule of a sound release, one at a time, with the one message each reader shows."""

from __future__ import annotations

import pytest

from scrollcase.errors import IntegrityError
from scrollcase.format.release import SbomInfo, SelfTestReport
from scrollcase.format.soundness import MISSING, Measured, release_problems, require_sound_release, shown
from tests.support.releases import box_json_for, make_manifest

MANIFEST = make_manifest(size=10, sha256="a" * 64)
BOX = box_json_for(MANIFEST)


def test_a_sound_release_has_no_problems_whatever_facts_are_given() -> None:
    sbom = SbomInfo(name="x.sbom.json", size=3, sha256="b" * 64)
    manifest = MANIFEST.model_copy(update={"sbom": sbom})
    facts = {"archive": Measured(10, "a" * 64), "box": BOX, "sbom": Measured(3, "b" * 64)}
    assert release_problems(manifest, **facts) == []  # type: ignore[arg-type]
    assert release_problems(manifest) == []  # no facts: only the manifest's own claims


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("boxId", "other-box"),
        ("version", "2.0.0"),
        ("targetId", "linux-x86_64-cpu"),
        ("pythonEntryPoint", "venv/bin/python3"),
        ("modelCacheSubdir", "other"),
        ("gpu", None),
    ],
)
def test_each_identity_field_must_match_the_manifest(key: str, value: object) -> None:
    problems = release_problems(MANIFEST, box=BOX.model_copy(update={key: value}), box_file="box.json")
    assert [(p.message, p.file, p.key) for p in problems] == [
        (
            "box.json and the release manifest disagree: "
            f"box.json says {value!r}, the manifest says {shown(getattr(MANIFEST, key))!r}",
            "box.json",
            key,
        )
    ]


def test_a_missing_box_json_is_a_problem_and_an_unread_one_is_not() -> None:
    missing = release_problems(MANIFEST, box=MISSING)
    assert [(p.message, p.file) for p in missing] == [
        ("the archive has no box.json at its root", f"{MANIFEST.archive.name}!box.json")
    ]
    assert release_problems(MANIFEST, box=None) == []


@pytest.mark.parametrize(("size", "sha"), [(11, "a" * 64), (9, "a" * 64), (10, "0" * 64), (10, "f" * 64)])
def test_an_archive_of_another_size_or_digest_is_refused(size: int, sha: str) -> None:
    problems = release_problems(MANIFEST, manifest_file="x.release.json", archive=Measured(size, sha))
    assert [p.key for p in problems] == ["archive.sha256"]
    assert problems[0].message.startswith(f"{MANIFEST.archive.name} does not match x.release.json: it is {size}")


def test_keys_other_than_the_releases_are_refused() -> None:
    edited = MANIFEST.model_copy(update={"keys": MANIFEST.keys.model_copy(update={"archive": "elsewhere"})})
    assert [p.key for p in release_problems(edited)] == ["keys"]


def test_a_missing_and_a_failed_self_test_are_told_apart() -> None:
    for report, said in ((None, "has no self-test report"), (SelfTestReport(passed=False, checks=[]), "failed")):
        problems = release_problems(MANIFEST.model_copy(update={"selfTest": report}))
        assert [p.key for p in problems] == ["selfTest.passed"] and said in problems[0].message


def test_a_cuda_release_without_gpu_evidence_is_refused_and_a_cpu_one_is_not() -> None:
    assert [p.key for p in release_problems(MANIFEST.model_copy(update={"gpu": None}))] == ["gpu"]
    cpu = make_manifest(size=10, sha256="a" * 64, cuda=None).model_copy(update={"gpu": None})
    assert release_problems(cpu) == []


def test_an_sbom_is_checked_only_when_the_manifest_names_one_and_the_reader_looked() -> None:
    manifest = MANIFEST.model_copy(update={"sbom": SbomInfo(name="x.sbom.json", size=3, sha256="b" * 64)})
    assert release_problems(MANIFEST, sbom=MISSING) == []  # the manifest names none
    assert release_problems(manifest, sbom=None) == []  # this reader did not look
    (missing,) = release_problems(manifest, manifest_file="r.json", sbom=MISSING)
    assert missing.message == "r.json names the SBOM x.sbom.json, which is not beside it"
    (other,) = release_problems(manifest, manifest_file="r.json", sbom=Measured(3, "c" * 64))
    assert (
        other.message
        == f"x.sbom.json is 3 bytes with sha256 {'c' * 64}, but r.json records 3 bytes with sha256 {'b' * 64}"
    )


def test_the_raising_wrapper_names_what_is_refused_and_the_first_problem() -> None:
    require_sound_release([], doing="publish", archive="a.tar.zst", manifest_file="a.release.json")  # nothing
    problems = release_problems(MANIFEST, box=BOX.model_copy(update={"version": "9.9.9"}), box_file="box.json")
    with pytest.raises(IntegrityError) as caught:
        require_sound_release(problems, doing="unpack", archive="a.tar.zst", manifest_file="its release manifest")
    assert caught.value.exit_code == 8 and caught.value.problems == problems
    assert caught.value.message == (
        "refusing to unpack: a.tar.zst and its release manifest do not describe one sound release "
        "(version: box.json and the release manifest disagree: box.json says '9.9.9', the manifest says '1.0.0')"
    )
    with pytest.raises(IntegrityError, match=r"^a\.tar\.zst and r\.json do not describe"):
        require_sound_release(problems, doing=None, archive="a.tar.zst", manifest_file="r.json")
