"""How the guest image's build runs its steps: a step that fails raises ``ImageError`` naming
it, with the end of what the command printed."""

import subprocess


class ImageError(Exception):
    """A step of the build failed; the message says which and why."""


def run(argv, step, **kwargs):
    done = subprocess.run(argv, capture_output=True, text=True, **kwargs)  # noqa: S603 - the build's own argument lists
    if done.returncode:
        raise ImageError(
            f"{step}: {' '.join(map(str, argv))} exited {done.returncode}: "
            f"{(done.stderr or done.stdout)[-2000:]}"
        )
    return done.stdout


def log(out, message):
    if out is not None:
        out.write(message + "\n")
        out.flush()
