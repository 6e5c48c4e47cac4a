"""JUnit XML for self-test and parity results (junit-xml), with repo-relative file/line per case."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from junit_xml import TestCase, TestSuite, to_xml_report_string


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
    tc = TestCase(case.name, classname=case.classname, elapsed_sec=case.seconds, file=case.file,
                  line=case.line, stdout=case.output or None)
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
    from xml.etree import ElementTree as ET

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


def write_junit(path: Path, suite: str, cases: Sequence[JUnitCase],
                properties: Mapping[str, str] | None = None) -> Path:
    """Write the report atomically (temp file, then rename) and return its path."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(junit_xml(suite, cases, properties), encoding="utf-8")
    tmp.replace(path)
    return path
