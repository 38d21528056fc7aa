"""Shared fixtures: the `tidemark` command line, for the interoperability tests.

The binary is taken from $TIDEMARK_CLI, else from the workspace's target directory
($CARGO_TARGET_DIR or ../target, release then debug). Without one the CLI tests skip, loudly;
with TIDEMARK_REQUIRE_CLI=1 (set by .ci/run) they fail instead.
"""

import os
import pathlib
import shutil
import subprocess

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]


def _find_cli():
    env = os.environ.get("TIDEMARK_CLI")
    if env:
        return env
    target = pathlib.Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target"))
    for profile in ("release", "debug"):
        exe = target / profile / "tidemark"
        if exe.is_file():
            return str(exe)
    return shutil.which("tidemark")


@pytest.fixture(scope="session")
def cli_path():
    exe = _find_cli()
    if exe is None:
        msg = "no tidemark binary: build it (cargo build -p tidemark-cli) or set TIDEMARK_CLI"
        if os.environ.get("TIDEMARK_REQUIRE_CLI") == "1":
            pytest.fail(msg)
        pytest.skip(msg)
    return exe


@pytest.fixture(scope="session")
def cli(cli_path):
    exe = cli_path

    def run(*args, input=None):
        p = subprocess.run(
            [exe, *map(str, args)], input=input, capture_output=True, check=False
        )
        if p.returncode != 0:
            raise AssertionError(
                f"tidemark {' '.join(map(str, args))} exited {p.returncode}: {p.stderr.decode()}"
            )
        return p.stdout.decode()

    return run
