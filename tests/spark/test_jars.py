"""bridge.spark.jars: the extra jars are exactly the Kafka, Avro, Delta and Iceberg ones, nothing
twice."""

from __future__ import annotations

from importlib import metadata
from pathlib import Path
from typing import Any

import pytest

from bridge.errors import ConfigError
from bridge.spark import jars


@pytest.mark.parametrize(
    ("name", "artifact"),
    [
        ("spark-core_2.13-4.0.0.jar", "spark-core_2.13"),
        ("zstd-jni-1.5.6-9.jar", "zstd-jni"),
        ("hive-exec-2.3.10-core.jar", "hive-exec"),
        ("jakarta.xml.bind-api-2.3.2.jar", "jakarta.xml.bind-api"),
        ("arrow-memory-netty-buffer-patch-18.1.0.jar", "arrow-memory-netty-buffer-patch"),
    ],
)
def test_artifact_ids_from_jar_names(name: str, artifact: str) -> None:
    match = jars._ARTIFACT.match(name)
    assert match is not None and match.group("name") == artifact


def test_mismatched_pyspark_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(metadata, "version", lambda package: "3.5.1")
    with pytest.raises(ConfigError, match=r"needs pyspark 4\.0\.0, found 3\.5\.1"):
        jars.check_versions()


def _jdk(root: Path, name: str, version: str) -> Path:
    home = root / name
    (home / "bin").mkdir(parents=True)
    (home / "bin" / "java").write_text("")
    (home / "release").write_text(f'JAVA_VERSION="{version}"\n')
    return home


def test_java_home_skips_jdks_spark_cannot_run_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    newest = _jdk(tmp_path, "jdk-25", "25.0.3")
    supported = _jdk(tmp_path, "jdk-21", "21.0.8")
    monkeypatch.setattr(jars, "JVM_DIR", tmp_path)
    monkeypatch.setenv("JAVA_HOME", str(newest))
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    assert jars.java_home() == supported
    monkeypatch.setenv("JAVA_HOME", str(supported))
    assert jars.java_home() == supported
    (supported / "release").write_text('JAVA_VERSION="11.0.2"\n')
    with pytest.raises(ConfigError, match="needs Java 17 or 21"):
        jars.java_home()


def test_resolved_jars(stack: Any) -> None:
    """Needs Maven, which the stack's installer provides."""
    names = {p.name for p in jars.spark_jars()}
    assert {
        "spark-sql-kafka-0-10_2.13-4.0.0.jar",
        "spark-token-provider-kafka-0-10_2.13-4.0.0.jar",
        "spark-avro_2.13-4.0.0.jar",
        "delta-spark_2.13-4.0.0.jar",
        "delta-storage-4.0.0.jar",
        f"iceberg-spark-runtime-4.0_2.13-{jars.ICEBERG_VERSION}.jar",
    } <= names
    shipped = jars.pyspark_artifacts()
    clashes = [n for n in names if (m := jars._ARTIFACT.match(n)) and m.group("name") in shipped]
    assert clashes == []
