"""The tests' in-process runner (tests/where.py): a run that changes the shared session's
settings (--conf, a larger input's shuffle partitions) leaves them as they were for the
next test, whether they were fetched before (their hash seen) or not."""

from __future__ import annotations

from tests import where


def test_settings_a_run_changes_are_put_back(spark):
    key, other = "spark.sql.shuffle.partitions", "spark.evtime.test.where"
    was = spark.conf.get(key)
    for _ in range(2):  # (the second time, the settings before are those seen the first)
        with where._same_conf():
            spark.conf.set(key, str(int(was) + 3))
            spark.conf.set(other, "x")
        assert spark.conf.get(key) == was
        assert spark.conf.get(other, None) is None
    with where._same_conf():  # (a run that changes nothing changes nothing)
        pass
    assert spark.conf.get(key) == was
