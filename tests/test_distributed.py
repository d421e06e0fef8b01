"""Grading through a real Dask cluster on 127.0.0.1 (one scheduler, two worker processes)
gives the same grades as grading in this process."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from transformer_course.grading.run.batch import grade_class

from .conftest import GRADING_TIMEOUT

BIN = Path(sys.executable).parent


@pytest.fixture
def cluster(tmp_path):
    """A scheduler and two single-threaded workers, as an instructor would start them."""
    address_file = tmp_path / "scheduler.json"
    common = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL, "cwd": tmp_path}
    procs = [subprocess.Popen([str(BIN / "dask"), "scheduler", "--host", "127.0.0.1", "--port", "0",
                               "--no-dashboard", "--scheduler-file", str(address_file)], **common)]
    try:
        for _ in range(120):
            if address_file.is_file() and address_file.stat().st_size:
                break
            time.sleep(0.5)
        else:
            pytest.fail("the Dask scheduler did not start")
        for _ in range(2):
            procs.append(subprocess.Popen([str(BIN / "dask"), "worker", "--scheduler-file", str(address_file),
                                           "--nthreads", "1", "--no-dashboard", "--host", "127.0.0.1"], **common))
        yield json.loads(address_file.read_text())["address"]
    finally:
        for proc in reversed(procs):
            proc.terminate()
        for proc in procs:
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()


def test_cluster_grades_equal_local_grades(repo, tmp_path, cluster):
    submitted = tmp_path / "submitted"
    for student in ("ada", "dev", "eun"):
        for assignment in ("01_self_attention", "03_multi_head"):
            source = repo.sample_class / student / assignment
            if source.is_dir():
                shutil.copytree(source, submitted / student / assignment)
    assert cluster.startswith("tcp://127.0.0.1:")
    remote = grade_class(submitted, tmp_path / "remote", repo, timeout=GRADING_TIMEOUT, progress=False,
                         scheduler=cluster)
    local = grade_class(submitted, tmp_path / "local", repo, timeout=GRADING_TIMEOUT, progress=False, workers=1)
    assert [(r.student_id, r.assignment, r.status, [(e.exercise, e.score) for e in r.exercises]) for r in remote] == \
        [(r.student_id, r.assignment, r.status, [(e.exercise, e.score) for e in r.exercises]) for r in local]
    assert (tmp_path / "remote" / "grades.csv").read_text() == (tmp_path / "local" / "grades.csv").read_text()
    assert any(r.score > 0 for r in remote) and any(r.score < r.max_score for r in remote)


def test_grades_own_cluster_spends_no_cpu_watching_itself():
    """`grade`'s local cluster runs without Dask's statistical profiler (a thread that walks every stack each 10 ms)
    and with slower health checks (daskquiet.LOCAL_CLUSTER): the workers see those settings, and every key is one
    Dask has (a misspelt key would be set and read by nobody)."""
    import dask
    from distributed import Client

    from transformer_course.grading.run.daskquiet import LOCAL_CLUSTER, local_cluster

    for key in LOCAL_CLUSTER:
        assert dask.config.get(key) != LOCAL_CLUSTER[key], key  # Dask's own default, which the cluster changes
    with local_cluster(1) as cluster, Client(cluster) as client:
        seen = client.run(lambda: {key: dask.config.get(key) for key in LOCAL_CLUSTER})
        callbacks = client.run(lambda dask_worker: sorted(dask_worker.periodic_callbacks))
    assert list(seen.values()) == [LOCAL_CLUSTER]
    assert all("profile" not in names for names in callbacks.values()), callbacks
    assert all("heartbeat" in names for names in callbacks.values()), callbacks  # a worker's periodic work, still there
