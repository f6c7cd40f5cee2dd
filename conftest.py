"""The whole suite's shared hooks (tests/ and compat_tests/): the suite's clock (tests/suite_timing.py)."""

pytest_plugins = ["suite_timing", "pytester"]
