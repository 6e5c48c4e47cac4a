"""The release manifest's canonical form."""

import json

import pytest

from scrollcase.errors import IntegrityError
from scrollcase.format.release import (
    CheckOutcome,
    ParityOutcome,
    ParityReport,
    SelfTestReport,
    dump_release,
    parse_release,
)
from tests.support.releases import make_manifest


def _with_timings(seconds: float):
    manifest = make_manifest(size=10, sha256="a" * 64)
    self_test = SelfTestReport(
        passed=True, checks=[CheckOutcome(name="import numpy", kind="import", passed=True, durationSeconds=seconds)]
    )
    parity = ParityReport(
        passed=True,
        reference="cpu",
        accelerators=["cpu", "cuda"],
        tolerances={"absolute": 1e-4},
        results=[ParityOutcome(accelerator="cuda", output="logits", passed=True, cosine=1.0, durationSeconds=seconds)],
    )
    return manifest.model_copy(update={"selfTest": self_test, "parity": parity})


def test_run_timings_stay_out_of_the_canonical_manifest():
    fast, slow = dump_release(_with_timings(0.1)), dump_release(_with_timings(9.9))
    assert fast == slow
    assert "durationSeconds" not in fast.decode()
    data = json.loads(fast)
    assert data["selfTest"]["checks"][0]["name"] == "import numpy"
    assert data["parity"]["results"][0]["cosine"] == 1.0


def test_canonical_manifest_round_trips():
    manifest = _with_timings(1.0)
    again = parse_release(dump_release(manifest))
    assert dump_release(again) == dump_release(manifest)


def test_defect8_sizes_must_be_json_integers() -> None:
    """A size given as "4096" or 4096.0 was accepted (and compared as a number later)."""
    raw = json.loads(dump_release(make_manifest(size=4096, sha256="a" * 64)))
    for bad in ("4096", 4096.0, True):
        raw["archive"]["size"] = bad
        with pytest.raises(IntegrityError) as caught:
            parse_release(json.dumps(raw), "x.release.json")
        assert [p.key for p in caught.value.problems] == ["archive.size"]
    raw["archive"]["size"] = 4096
    assert parse_release(json.dumps(raw)).archive.size == 4096


def test_archive_name_must_be_a_plain_file_name() -> None:
    raw = json.loads(dump_release(make_manifest(size=1, sha256="a" * 64)))
    for bad in ("../x.tar.zst", "/etc/passwd", "a/b.tar.zst", "..", "", "C:x.tar.zst", "a\\b"):
        raw["archive"]["name"] = bad
        with pytest.raises(IntegrityError):
            parse_release(json.dumps(raw))


def test_the_longest_dest_comes_from_the_binary_relocation_files() -> None:
    from scrollcase.format.release import release_relocation
    from scrollcase.format.relocate import BOX_PREFIX_PLACEHOLDER, PrefixFile, RelocationInfo

    text = PrefixFile(path="venv/bin/tool", mode="text")
    binary = PrefixFile(path="venv/lib/libpython3.11.so", mode="binary")
    limited = release_relocation(RelocationInfo(placeholder=BOX_PREFIX_PLACEHOLDER, files=[text, binary]))
    assert (limited.placeholderBytes, limited.maxDestBytes) == (196, 196)
    unlimited = release_relocation(RelocationInfo(placeholder="/opt/ü", files=[text]))
    assert (unlimited.placeholderBytes, unlimited.maxDestBytes) == (7, None)  # UTF-8 bytes; any DEST length
    raw = json.loads(dump_release(make_manifest(size=1, sha256="a" * 64).model_copy(update={"relocation": unlimited})))
    assert raw["relocation"] == {"placeholderBytes": 7}


def test_a_manifest_without_the_relocation_field_still_parses() -> None:
    raw = json.loads(dump_release(make_manifest(size=1, sha256="a" * 64)))
    assert "relocation" not in raw and parse_release(json.dumps(raw)).relocation is None
    raw["relocation"] = {"placeholderBytes": 196, "maxDestBytes": "196"}
    with pytest.raises(IntegrityError, match="maxDestBytes"):
        parse_release(json.dumps(raw))
