"""Python code run in a child process of the suite, from the repository's root: for what must
start from fresh settings (production mode, another database)."""

import subprocess
import sys
from pathlib import Path

BASE_DIR = Path(__file__).resolve().parents[1]


def run_python(code: str, env: dict, timeout: float) -> subprocess.CompletedProcess:
    """``python -c code`` with ``env``; fails the test with the child's stderr if it fails."""
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=BASE_DIR,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done
