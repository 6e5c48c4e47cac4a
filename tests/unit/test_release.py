"""The release manifest's canonical form."""

import json

from scrollcase.release import CheckOutcome, ParityOutcome, ParityReport, SelfTestReport, dump_release, parse_release
from tests.support.releases import make_manifest


def _with_timings(seconds: float):
    manifest = make_manifest(size=10, sha256="a" * 64)
    self_test = SelfTestReport(passed=True, checks=[
        CheckOutcome(name="import numpy", kind="import", passed=True, durationSeconds=seconds)])
    parity = ParityReport(passed=True, reference="cpu", accelerators=["cpu", "cuda"],
                          tolerances={"absolute": 1e-4}, results=[
                              ParityOutcome(accelerator="cuda", output="logits", passed=True, cosine=1.0,
                                            durationSeconds=seconds)])
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
