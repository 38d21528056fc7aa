"""redis-py, as most Redis users call Redis, runs every command family of the module: the
standalone client, and the cluster client (sync, async and a pipeline) against a three-master
cluster, unmodified. Each builds the values the other builds, byte for byte, and the cluster
client's commands reach the node owning their key the first time (no MOVED anywhere).

Needs redis-server and the module (``TIDEMARK_MODULE``, else target/debug); without
redis-server the tests skip loudly, unless ``TIDEMARK_REQUIRE_REDIS=1``.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Iterator

import pytest

redis = pytest.importorskip("redis")
from redis.cluster import ClusterNode, RedisCluster  # noqa: E402

ROOT = Path(__file__).resolve().parents[4]
SCRIPT = ROOT / "crates" / "tidemark-redis" / "tests" / "data" / "every_family.txt"


def module_path() -> Path:
    given = os.environ.get("TIDEMARK_MODULE")
    if given:
        return Path(given)
    target = Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target"))
    return target / "debug" / "libtidemark_redis.so"


def need_redis() -> None:
    if shutil.which("redis-server") is None or not module_path().exists():
        why = f"redis-server or the module ({module_path()}) is missing"
        if os.environ.get("TIDEMARK_REQUIRE_REDIS") == "1":
            pytest.fail(f"TIDEMARK_REQUIRE_REDIS=1 but {why}")
        sys.stderr.write(f"\n!!! SKIPPING the redis-py client tests: {why} !!!\n")
        pytest.skip(why)


def free_port_pair() -> int:
    """A port whose cluster bus port (port + 10000) is free too."""
    for _ in range(200):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        if port + 10000 > 65535:
            continue
        try:
            with socket.socket() as a, socket.socket() as b:
                a.bind(("127.0.0.1", port))
                b.bind(("127.0.0.1", port + 10000))
            return port
        except OSError:
            continue
    raise RuntimeError("no free port pair")


class Server:
    def __init__(self, directory: Path, cluster: bool) -> None:
        self.port = free_port_pair()
        directory.mkdir(parents=True, exist_ok=True)
        args = [
            "redis-server", "--port", str(self.port), "--bind", "127.0.0.1",
            "--loadmodule", str(module_path()), "--dir", str(directory),
            "--save", "", "--appendonly", "no", "--protected-mode", "no",
        ]
        if cluster:
            args += ["--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
                     "--cluster-node-timeout", "5000"]
        log = open(directory / "redis.log", "w")
        self.proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT)
        self.client = redis.Redis(port=self.port)
        deadline = time.time() + 20
        while True:
            try:
                self.client.ping()
                break
            except redis.ConnectionError:
                if time.time() > deadline or self.proc.poll() is not None:
                    raise RuntimeError(f"redis-server on {self.port} did not start")
                time.sleep(0.05)

    def stop(self) -> None:
        self.proc.kill()
        self.proc.wait()


@pytest.fixture(scope="module")
def servers() -> Iterator[tuple[Server, list[Server]]]:
    need_redis()
    tmp = Path(tempfile.mkdtemp(prefix="tidemark-redis-py-"))
    started: list[Server] = []
    try:
        standalone = Server(tmp / "standalone", cluster=False)
        started.append(standalone)
        nodes = [Server(tmp / f"node{i}", cluster=True) for i in range(3)]
        started += nodes
        subprocess.run(
            ["redis-cli", "--cluster", "create",
             *[f"127.0.0.1:{n.port}" for n in nodes],
             "--cluster-replicas", "0", "--cluster-yes"],
            check=True, capture_output=True, timeout=120,
        )
        deadline = time.time() + 30
        while not all(b"cluster_state:ok" in n.client.execute_command("CLUSTER", "INFO")
                      for n in nodes):
            if time.time() > deadline:
                raise RuntimeError("the cluster did not come up")
            time.sleep(0.1)
        yield standalone, nodes
    finally:
        for s in started:
            s.stop()
        shutil.rmtree(tmp, ignore_errors=True)


def lines(group: str) -> list[list[str]]:
    out = []
    for line in SCRIPT.read_text().splitlines():
        if line.startswith("#") or not line.strip():
            continue
        out.append(line.replace("{g}", "{" + group + "}").split())
    return out


def keys(group: str) -> list[str]:
    return ["{" + group + "}:" + k for k in ("c", "d", "s", "f", "q", "e", "p", "ps")]


def moved(nodes: list[Server]) -> int:
    total = 0
    for n in nodes:
        stats = n.client.info("errorstats")
        total += int(stats.get("errorstat_MOVED", {}).get("count", 0))
    return total


def test_redis_py_runs_every_family_standalone_and_on_a_cluster(servers) -> None:
    standalone, nodes = servers
    for n in nodes:
        n.client.execute_command("CONFIG", "RESETSTAT")
    rc = RedisCluster(startup_nodes=[ClusterNode("127.0.0.1", nodes[0].port)])
    groups = [f"py{i}" for i in range(30)]
    for g in groups:
        for words in lines(g):
            want = standalone.client.execute_command(*words)
            got = rc.execute_command(*words)
            assert got == want, (words, got, want)
    # A pipeline on the cluster client.
    pipe = rc.pipeline()
    for words in lines("pipe"):
        pipe.execute_command(*words)
    for words in lines("pipe"):
        standalone.client.execute_command(*words)
    pipe.execute()
    assert moved(nodes) == 0, "a node redirected a command of the cluster client"
    # The values are byte for byte the standalone server's.
    for g in groups + ["pipe"]:
        for k in keys(g):
            assert rc.execute_command("TM.DUMP", k) == standalone.client.execute_command("TM.DUMP", k), k
    # Groups spread over every master.
    assert all(n.client.dbsize() > 0 for n in nodes)
    rc.close()


def test_the_async_cluster_client_runs_every_family(servers) -> None:
    standalone, nodes = servers
    from redis.asyncio.cluster import RedisCluster as AsyncRedisCluster

    async def run() -> None:
        rc = AsyncRedisCluster(host="127.0.0.1", port=nodes[1].port)
        for g in (f"aio{i}" for i in range(10)):
            for words in lines(g):
                want = standalone.client.execute_command(*words)
                got = await rc.execute_command(*words)
                assert got == want, (words, got, want)
            for k in keys(g):
                assert await rc.execute_command("TM.DUMP", k) == standalone.client.execute_command("TM.DUMP", k)
        await rc.aclose()

    asyncio.run(run())


def test_a_two_dot_name_is_what_the_cluster_client_refuses(servers) -> None:
    """The reason for the names: redis-py refuses a name with two dots before sending it."""
    _, nodes = servers
    rc = RedisCluster(host="127.0.0.1", port=nodes[2].port)
    with pytest.raises(ValueError, match="Wrong command or module name"):
        rc.execute_command("TM.COUNT.CREATE", "x", "WINDOW", 60000)
    rc.close()
