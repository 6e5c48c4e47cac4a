"""scrollcase: build, prove and publish self-contained Python boxes for ML model runtimes.

The library API for host apps and CI (docs/install.md#from-python), the same calls the CLI makes:

- :func:`install_box` ``(store, box_id, dest, ..., trusted_root=None, trust_state=None) -> Installed``: the
  release that fits this machine, downloaded, checked and unpacked (``scrollcase install``); with
  ``trusted_root`` (the store's TUF ``root.json`` as bytes or a file, shipped with the host app) the index,
  manifest and archive facts are first checked against the store's signed metadata, and a refusal raises a
  ``TrustError`` (exit 13) before the archive is downloaded (docs/install.md#signed-store-metadata);
  :func:`list_releases` says what fits and why;
- :func:`upgrade_box` ``(store, dest, ..., trusted_root=None, trust_state=None) -> Upgraded``: only the
  changed frames downloaded, swapped in beside DEST (``scrollcase upgrade``), checked the same way;
- :func:`verify_installed` ``(dest) -> InstalledReport``: every file changed since install
  (``scrollcase verify --installed``);
- :func:`verify_gpu_proof` ``(release, bundle, trusted_root, workflow=...) -> VerifiedProof``: the release's
  signed GPU proof checked offline against the Sigstore trusted root the host ships
  (``scrollcase verify --gpu-proof``, docs/trust.md#signed-gpu-proof);
- :func:`plan_build` / :func:`execute_build`: recipe + lock -> box archive + release manifest
  (``scrollcase build``); :func:`publish` ``(store, manifest, archive_path, ...)`` (``scrollcase publish``);
- :class:`ScrollcaseError`: what every one of them raises, with its exit code, fix and located problems.

These names are stable: a minor release adds keyword arguments with defaults, never removes or reorders.
Each is imported on first use (PEP 562 ``__getattr__``): ``import scrollcase`` imports nothing heavy, and
``scrollcase --version`` pays for no API it does not call.  The ``TYPE_CHECKING`` block gives mypy and
IDEs the same names with their types.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from scrollcase.build.pipeline import execute_build
    from scrollcase.build.plan import plan_build
    from scrollcase.client.install import Installed, Listing, install_box, list_releases
    from scrollcase.client.upgrade import Upgraded, upgrade_box
    from scrollcase.errors import ScrollcaseError
    from scrollcase.format.receipt import InstalledReport, verify_installed
    from scrollcase.store.publish import publish
    from scrollcase.trust.bundle import VerifiedProof, verify_gpu_proof

    __version__: str

# name -> the module that defines it (tests/unit/test___init__.py holds this equal to the block above)
_API: dict[str, str] = {
    "install_box": "scrollcase.client.install",
    "list_releases": "scrollcase.client.install",
    "Installed": "scrollcase.client.install",
    "Listing": "scrollcase.client.install",
    "upgrade_box": "scrollcase.client.upgrade",
    "Upgraded": "scrollcase.client.upgrade",
    "verify_installed": "scrollcase.format.receipt",
    "InstalledReport": "scrollcase.format.receipt",
    "plan_build": "scrollcase.build.plan",
    "execute_build": "scrollcase.build.pipeline",
    "publish": "scrollcase.store.publish",
    "ScrollcaseError": "scrollcase.errors",
    "verify_gpu_proof": "scrollcase.trust.bundle",
    "VerifiedProof": "scrollcase.trust.bundle",
}

__all__ = [
    "Installed",
    "InstalledReport",
    "Listing",
    "ScrollcaseError",
    "Upgraded",
    "VerifiedProof",
    "__version__",
    "execute_build",
    "install_box",
    "list_releases",
    "plan_build",
    "publish",
    "upgrade_box",
    "verify_gpu_proof",
    "verify_installed",
]


def __getattr__(name: str) -> object:
    """An API name, imported on first use; ``__version__``, looked up on first use too (importlib.metadata
    costs ~0.1 s at every CLI start)."""
    if name == "__version__":
        from scrollcase.version import package_version

        found: object = package_version()
    elif name in _API:
        found = getattr(importlib.import_module(_API[name]), name)
    else:
        raise AttributeError(f"module 'scrollcase' has no attribute {name!r}")
    globals()[name] = found  # the next lookup is a plain attribute
    return found


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
