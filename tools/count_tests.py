#!/usr/bin/env python3
"""Counts test cases in Bazel's test.xml files written after a stamp file.

    count_tests.py STAMP TESTLOGS_DIR    ->  prints "PASSED FAILED"

A case passes when it ran and has no <failure> or <error> child; a case
with several failing EXPECTs counts once. A test.xml with no <testcase>
(a binary that crashed, timed out or was aborted by a sanitizer before
GoogleTest wrote its report: Bazel then writes a one-line <error>) counts
as one failed case, as does an unparsable file. Files older than STAMP are
left from earlier runs (a target that failed to build leaves its old
test.xml behind) and are not counted; a target whose build failed is
reported by bazel's own exit status, which .ci/run also checks.
"""
import os
import sys
import xml.etree.ElementTree as ET


def count(path):
    try:
        root = ET.parse(path).getroot()
    except ET.ParseError:
        return 0, 1
    cases = list(root.iter("testcase"))
    if not cases:
        return 0, 1
    passed = failed = 0
    for case in cases:
        if case.get("status") == "notrun" or case.get("result") == "skipped":
            # Skipped cases prove nothing: they count as neither.
            if case.find("failure") is None and case.find("error") is None:
                continue
        bad = case.find("failure") is not None or case.find("error") is not None
        if bad:
            failed += 1
        else:
            passed += 1
    # A suite-level error (a crash after some cases were written).
    for suite in root.iter("testsuite"):
        if suite.find("error") is not None:
            failed += 1
    return passed, failed


def main():
    stamp, logs = sys.argv[1], sys.argv[2]
    since = os.stat(stamp).st_mtime
    passed = failed = 0
    for dirpath, _, files in os.walk(logs, followlinks=True):
        if "test.xml" not in files:
            continue
        path = os.path.join(dirpath, "test.xml")
        if os.stat(path).st_mtime < since:
            continue
        p, f = count(path)
        passed += p
        failed += f
    print(passed, failed)


if __name__ == "__main__":
    main()
