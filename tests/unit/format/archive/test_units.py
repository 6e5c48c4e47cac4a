"""units: which frame each member goes into, and in which order (pure)."""

from __future__ import annotations

import posixpath

from hypothesis import given
from hypothesis import strategies as st

from scrollcase.format.archive.units import Member, conda_claims, group_units, record_claims


def _names(units: list) -> dict[str, list[str]]:  # type: ignore[type-arg]
    return {u.name: [m.name for m in u.members] for u in units}


def test_units_follow_packages_in_a_fixed_order() -> None:
    members = [
        Member("venv", "dir"),
        Member("venv/bin", "dir"),
        Member("box.json", "file", 2),
        Member("venv/bin/python", "symlink", link="python3.11"),
        Member("venv/bin/python3.11", "file", 10),
        Member("venv/conda-meta/python-3.11.json", "file", 5),
        Member("venv/site/a/__init__.py", "file", 1),
        Member("venv/site/a/__pycache__/__init__.cpython-311.pyc", "file", 1),
        Member("venv/site/a-1.dist-info/RECORD", "file", 1),
        Member("venv/site/orphan/__pycache__/x.cpython-311.pyc", "file", 1),
        Member("models/m/w.bin", "file", 9),
        Member("zzz", "file", 1),
    ]
    claims = [
        (
            "conda/python-3.11",
            conda_claims("venv/conda-meta/python-3.11.json", "venv", b'{"files": ["bin/python", "bin/python3.11"]}'),
        ),
        (
            "wheel/a-1",
            record_claims("venv/site/a-1.dist-info/RECORD", b"a/__init__.py,sha256=x,1\na-1.dist-info/RECORD,,\n"),
        ),
    ]
    units = group_units(reversed(members), claims, asset_dir="models")
    assert _names(units) == {
        "dirs": ["venv", "venv/bin"],
        "box.json": ["box.json"],
        "conda/python-3.11": ["venv/bin/python", "venv/bin/python3.11", "venv/conda-meta/python-3.11.json"],
        "wheel/a-1": [
            "venv/site/a-1.dist-info/RECORD",
            "venv/site/a/__init__.py",
            "venv/site/a/__pycache__/__init__.cpython-311.pyc",
        ],
        "assets/m/w.bin": ["models/m/w.bin"],
        "rest": ["venv/site/orphan/__pycache__/x.cpython-311.pyc", "zzz"],
    }
    assert list(_names(units)) == ["dirs", "box.json", "conda/python-3.11", "wheel/a-1", "assets/m/w.bin", "rest"]


def test_first_claim_wins_and_record_paths_are_resolved() -> None:
    claimed = record_claims("env/lib/sp/b-2.dist-info/RECORD", b"../../bin/tool,,\nb.py,,\n")
    assert claimed == ["env/lib/sp/b-2.dist-info/RECORD", "env/bin/tool", "env/lib/sp/b.py"]
    units = group_units([Member("env/bin/tool", "file")], [("conda/b", ["env/bin/tool"]), ("wheel/b-2", claimed)])
    assert _names(units) == {"conda/b": ["env/bin/tool"]}


def test_a_broken_conda_record_claims_only_itself() -> None:
    assert conda_claims("e/conda-meta/x.json", "e", b"not json") == ["e/conda-meta/x.json"]


_PARTS = st.sampled_from(["a", "b.py", ".", "..", "", ".x", "x.", "...", "dist-info"])


@given(
    base=st.sampled_from(["", "a", "venv/lib/python3.11/site-packages"]),
    name=st.lists(_PARTS, min_size=1, max_size=6).map("/".join).filter(bool),
)
def test_a_record_row_resolves_as_normpath_of_the_join(base: str, name: str) -> None:
    """The fast path for plain rows must agree with posixpath on every row, odd ones included."""
    record = f"{base}/pkg-1.0.dist-info/RECORD" if base else "pkg-1.0.dist-info/RECORD"
    claimed = record_claims(record, f"{name},sha256=x,1\n".encode())
    assert claimed == [record, posixpath.normpath(posixpath.join(base, name))]
