"""pipeline/session.py: the quick-start JVM flags are for tests and short jobs only."""

from pipeline.session import FAST_JVM, session_settings


def test_short_jobs_get_the_quick_start_jvm_flags():
    assert session_settings()["spark.driver.extraJavaOptions"] == FAST_JVM


def test_a_long_running_job_keeps_the_jvms_full_jit():
    assert "spark.driver.extraJavaOptions" not in session_settings(long_running=True)


def test_the_callers_settings_win():
    settings = session_settings({"spark.driver.extraJavaOptions": "-Xss4m", "spark.sql.shuffle.partitions": "8"})
    assert settings["spark.driver.extraJavaOptions"] == "-Xss4m"
    assert settings["spark.sql.shuffle.partitions"] == "8"
    assert settings["spark.sql.session.timeZone"] == "UTC"
