"""lms.times: a time from an LMS becomes the hand-in's timestamp.txt, and its source is kept in times.csv."""

from __future__ import annotations

import datetime as dt

import pytest

from transformer_course.instructors.deadlines import parse_timestamp
from transformer_course.lms import times


def test_a_recorded_time_is_the_timestamp_the_grader_reads_and_its_source_is_kept(tmp_path):
    submitted = tmp_path / "submitted"
    (submitted / "10001" / "01_self_attention").mkdir(parents=True)
    (submitted / "10002" / "01_self_attention").mkdir(parents=True)
    when = dt.datetime(2026, 11, 23, 18, 0, 5, tzinfo=dt.timezone(dt.timedelta(hours=-5)))
    times.record(submitted, {("10001", "01_self_attention"): (when, "canvas api"),
                             ("10003", "01_self_attention"): (when, "canvas api")})  # not collected: skipped
    stamp = (submitted / "10001" / "01_self_attention" / "timestamp.txt").read_text()
    assert parse_timestamp(stamp) == when
    assert times.source_of(submitted, "10001", "01_self_attention") == "canvas api"
    assert times.source_of(submitted, "10002", "01_self_attention") == times.FROM_HAND_IN
    assert ("10003", "01_self_attention") not in times.sources(submitted)
    later = when + dt.timedelta(hours=1)
    times.record(submitted, {("10001", "01_self_attention"): (later, "--times fixes.csv")})  # replaced, not added
    assert [r["source"] for r in times.sources(submitted).values()] == ["--times fixes.csv"]


def test_a_time_without_a_zone_is_refused(tmp_path):
    (tmp_path / "s" / "1" / "a").mkdir(parents=True)
    with pytest.raises(ValueError, match="without a time zone"):
        times.record(tmp_path / "s", {("1", "a"): (dt.datetime(2026, 1, 1), "canvas api")})


def test_a_times_csv_this_module_did_not_write_is_named(tmp_path):
    (tmp_path / "s").mkdir()
    (tmp_path / "times.csv").write_text("id,when\n1,2026\n")
    with pytest.raises(ValueError, match="expected"):
        times.sources(tmp_path / "s")
