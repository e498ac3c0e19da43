"""Where things live: the default vault, demo copies, the bundled sample vault."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from platformdirs import user_data_path

import memlink_tui


def data_dir() -> Path:
    return Path(os.environ.get("MEMLINK_HOME") or user_data_path("memlink", appauthor=False))


def default_vault() -> Path:
    env = os.environ.get("MEMLINK_VAULT")
    return Path(env).expanduser() if env else data_dir() / "vault"


def sample_vault() -> Path:
    """The sample vault shipped with memlink: the repo copy in a checkout, else the copy
    installed beside the package (a folder of data, not a package: ``resources.files``
    would hand back a MultiplexedPath whose ``str`` is no path)."""
    here = Path(memlink_tui.__file__).resolve().parent
    for candidate in (here.parent / "sample_vault", here / "sample_vault"):
        if (candidate / "memlink.yaml").is_file():
            return candidate
    raise FileNotFoundError(f"the sample vault is not installed (looked in {here.parent / 'sample_vault'} "
                            f"and {here / 'sample_vault'}); reinstall memlink")


def demo_vault(fresh: bool = False) -> tuple[Path, bool]:
    """The data folder's one demo copy, and whether it was made now: an existing copy is
    reused (what you changed in it stays) unless ``fresh``, which replaces it whole. The
    new copy is made beside it and swapped in, so a failed copy leaves the old one."""
    target = data_dir() / "demo"
    if (target / "memlink.yaml").is_file() and not fresh:
        return target, False
    if target.exists() and not (target / "memlink.yaml").is_file() and any(target.iterdir()):
        raise FileExistsError(f"{target} is not a memlink vault; move it away and run memlink demo again")
    new, old = target.with_name(".demo-new"), target.with_name(".demo-old")
    for leftover in (new, old):  # of a copy that was cut short
        shutil.rmtree(leftover, ignore_errors=True)
    copy_sample_vault(new)
    if target.exists():
        target.rename(old)
    new.rename(target)
    shutil.rmtree(old, ignore_errors=True)
    return target, True


def copy_sample_vault(target: Path) -> Path:
    """Copy the sample vault to a new or empty folder (never touching the original)."""
    target = Path(target).expanduser()
    if target.exists() and any(target.iterdir()):
        raise FileExistsError(f"{target} exists and is not empty; pick another --vault for the demo")
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copytree(
        sample_vault(),
        target,
        dirs_exist_ok=True,
        ignore=shutil.ignore_patterns(".memlink", "__pycache__", "__init__.py"),
    )
    return target
