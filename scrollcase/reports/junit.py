"""JUnit XML for self-test and parity results (junit-xml), and reading any JUnit file back.

A report format, not GitHub: the build, the self-test and the parity gate write it; ``github/`` renders
what is read back as annotations (its file paths made repository-relative by :mod:`scrollcase.github.paths`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from xml.etree import ElementTree as ET

from junit_xml import TestCase, TestSuite, to_xml_report_string

from scrollcase.errors import GitHubError, Problem
from scrollcase.io.files import ReadErrors, read_text, write_atomic


@dataclass(frozen=True)
class JUnitCase:
    name: str
    classname: str
    passed: bool
    message: str = ""
    output: str = ""  # details: stdout/stderr or metrics
    seconds: float = 0.0
    file: str | None = None
    line: int | None = None
    skipped: bool = False
    properties: Mapping[str, str] = field(default_factory=dict)


def _case(case: JUnitCase) -> TestCase:
    tc = TestCase(
        case.name,
        classname=case.classname,
        elapsed_sec=case.seconds,
        file=case.file,
        line=case.line,
        stdout=case.output or None,
    )
    if case.skipped:
        tc.add_skipped_info(message=case.message)
    elif not case.passed:
        tc.add_failure_info(message=case.message or "failed", output=case.output or case.message)
    return tc


def junit_xml(suite: str, cases: Sequence[JUnitCase], properties: Mapping[str, str] | None = None) -> str:
    """The JUnit document for one suite.  Case properties go into ``<properties>`` per case."""
    test_suite = TestSuite(suite, [_case(c) for c in cases], properties=dict(properties or {}))
    xml: str = to_xml_report_string([test_suite], prettyprint=True, encoding="utf-8")
    return _inject_case_properties(xml, cases)


def _inject_case_properties(xml: str, cases: Sequence[JUnitCase]) -> str:
    """junit-xml has no per-case properties; add them the way pytest and GitLab read them."""
    if not any(c.properties for c in cases):
        return xml
    root = ET.fromstring(xml)  # noqa: S314 - our own document
    elements = root.findall(".//testcase")
    for element, case in zip(elements, cases, strict=True):
        if case.properties:
            props = ET.Element("properties")
            for key, value in case.properties.items():
                ET.SubElement(props, "property", name=key, value=str(value))
            element.insert(0, props)
    return '<?xml version="1.0" encoding="utf-8"?>\n' + ET.tostring(root, encoding="unicode")


def write_junit(
    path: Path, suite: str, cases: Sequence[JUnitCase], properties: Mapping[str, str] | None = None
) -> Path:
    """Write the report atomically (temp file, then rename) and return its path."""
    return write_atomic(path, junit_xml(suite, cases, properties).encode("utf-8"))


# --- reading back ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class JUnitResult:
    """One ``<testcase>`` read from a JUnit file, whoever wrote it."""

    suite: str
    name: str
    classname: str
    status: str  # "passed" | "failed" | "error" | "skipped"
    message: str = ""
    details: str = ""
    seconds: float = 0.0
    file: str | None = None
    line: int | None = None

    @property
    def failed(self) -> bool:
        return self.status in ("failed", "error")


def _float(text: str | None) -> float:
    try:
        return float(text or 0)
    except ValueError:
        return 0.0


def _int(text: str | None) -> int | None:
    try:
        return int(text) if text else None
    except ValueError:
        return None


def _status(case: ET.Element) -> tuple[str, str, str]:
    for tag, status in (("failure", "failed"), ("error", "error"), ("skipped", "skipped")):
        element = case.find(tag)
        if element is not None:
            return status, element.get("message") or "", (element.text or "").strip()
    return "passed", "", ""


def parse_junit(text: str, file: str = "junit.xml") -> list[JUnitResult]:
    """Every test case in a JUnit document (``<testsuites>`` or a bare ``<testsuite>``)."""
    try:
        root = ET.fromstring(text)  # noqa: S314 - CI artifacts of this repository, not user uploads
    except ET.ParseError as exc:
        raise GitHubError(
            f"{file} is not valid JUnit XML: {exc}", fix="pass the file written by --junit (or any JUnit XML report)"
        ) from None
    suites = [root] if root.tag == "testsuite" else root.iter("testsuite")
    results: list[JUnitResult] = []
    for suite in suites:
        for case in suite.findall("testcase"):
            status, message, details = _status(case)
            results.append(
                JUnitResult(
                    suite=suite.get("name") or "",
                    name=case.get("name") or "",
                    classname=case.get("classname") or "",
                    status=status,
                    message=message,
                    details=details or (case.findtext("system-out") or "").strip(),
                    seconds=_float(case.get("time")),
                    file=case.get("file") or None,
                    line=_int(case.get("line")),
                )
            )
    return results


_READ_JUNIT = ReadErrors(
    GitHubError,
    missing="JUnit file {path} does not exist",
    missing_fix="check the --junit path of the step that should have written it",
    unreadable="cannot read JUnit file {path}: {exc}",
)


def read_junit(path: Path) -> list[JUnitResult]:
    text = read_text(path, _READ_JUNIT)
    return parse_junit(text, file=str(path))


def result_problem(result: JUnitResult, fallback_file: str | None = None) -> Problem:
    """A failed case as a located problem (for annotations and check runs)."""
    label = ".".join(p for p in (result.classname, result.name) if p)
    message = f"{label}: {result.message or result.status}"
    if result.details and result.details != result.message:
        message += f"\n{result.details[:2000]}"
    return Problem(
        message=message,
        file=result.file or fallback_file,
        line=result.line,
        severity="error" if result.failed else "notice",
    )


@dataclass(frozen=True)
class Tally:
    total: int
    passed: int
    failed: int
    skipped: int
    files: int = 1

    @property
    def conclusion(self) -> str:
        """failure, success, or missing when no report was found (the step died before writing one)."""
        if self.failed:
            return "failure"
        return "success" if self.files else "missing"


def tally(results: Sequence[JUnitResult], files: int = 1) -> Tally:
    """How many cases passed, failed and were skipped, over ``files`` reports read."""
    return Tally(
        total=len(results),
        passed=sum(r.status == "passed" for r in results),
        failed=sum(r.failed for r in results),
        skipped=sum(r.status == "skipped" for r in results),
        files=files,
    )
