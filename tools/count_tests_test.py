"""tools/count_tests.py: what .ci/run's "N passed, N failed" counts."""
import os
import tempfile
import time
import unittest

import count_tests

PASS = '<testcase name="a" status="run" result="completed"/>'
FAIL = ('<testcase name="b" status="run" result="completed">'
        '<failure message="x"/><failure message="y"/></testcase>')
SKIP = '<testcase name="c" status="run" result="skipped"><skipped/></testcase>'


def suites(*cases, error=False):
    body = "".join(cases) + ('<error message="crash"/>' if error else "")
    return f'<testsuites><testsuite name="s">{body}</testsuite></testsuites>'


class CountTestsTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp()
        self.stamp = os.path.join(self.dir, "stamp")

    def write(self, name, text, age=0.0):
        path = os.path.join(self.dir, name, "test.xml")
        os.makedirs(os.path.dirname(path))
        with open(path, "w") as f:
            f.write(text)
        if age:
            t = time.time() - age
            os.utime(path, (t, t))
        return path

    def run_count(self):
        passed = failed = 0
        for dirpath, _, files in os.walk(self.dir):
            if "test.xml" in files:
                path = os.path.join(dirpath, "test.xml")
                if os.stat(path).st_mtime >= os.stat(self.stamp).st_mtime:
                    p, f = count_tests.count(path)
                    passed, failed = passed + p, failed + f
        return passed, failed

    def test_a_case_with_two_failing_expects_counts_once(self):
        self.assertEqual(count_tests.count(self.write("t", suites(PASS, FAIL))), (1, 1))

    def test_skipped_cases_count_as_neither(self):
        self.assertEqual(count_tests.count(self.write("t", suites(PASS, SKIP))), (1, 0))

    def test_a_crash_without_cases_is_a_failure(self):
        crashed = ('<testsuites><testsuite name="t" tests="1" failures="0" errors="1">'
                   '<error message="exited with error code 134"/></testsuite></testsuites>')
        self.assertEqual(count_tests.count(self.write("t", crashed)), (0, 1))
        self.assertEqual(count_tests.count(self.write("u", "<testsuites")), (0, 1))

    def test_a_suite_level_error_after_some_cases_is_a_failure(self):
        self.assertEqual(count_tests.count(self.write("t", suites(PASS, error=True))), (1, 1))

    def test_files_older_than_the_stamp_are_not_counted(self):
        self.write("old", suites(FAIL), age=3600)
        open(self.stamp, "w").close()
        self.write("new", suites(PASS))
        self.assertEqual(self.run_count(), (1, 0))


if __name__ == "__main__":
    unittest.main()
