"""Where things live: the default vault, demo copies, the bundled sample vault."""

from __future__ import annotations

import datetime as dt
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


def copy_sample_vault(target: Path | None = None) -> Path:
    """Copy the sample vault to a fresh folder (never touching the original)."""
    if target is None:
        stamp = dt.datetime.now().strftime("%Y%m%d-%H%M%S")
        target = data_dir() / f"demo-{stamp}"
        n = 1
        while target.exists():
            n += 1
            target = data_dir() / f"demo-{stamp}-{n}"
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
