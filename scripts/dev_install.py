#!/usr/bin/env python3
"""Installs this checkout's memprof package into the running Python's environment, as an
editable install would: a .pth that puts src/wheel on sys.path, and a dist-info with the pytest
plugin's entry point (pytest finds plugins by entry point). The native core is the library cargo
builds (target/{debug,release}/libmemprof.so; src/wheel/memprof/_core.py loads it).

    .venv/bin/python scripts/dev_install.py
"""
import shutil
import sysconfig
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
NAME = "torch-memprof"
VERSION = "0.0.0.dev0"


def main():
    site = Path(sysconfig.get_paths()["purelib"])
    (site / "memprof-dev.pth").write_text(str(ROOT / "src" / "wheel") + "\n")
    for old in [*site.glob("memprof-*.dist-info"), *site.glob("torch_memprof-*.dist-info")]:
        shutil.rmtree(old)
    info = site / ("%s-%s.dist-info" % (NAME.replace("-", "_"), VERSION))
    info.mkdir()
    (info / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: %s\nVersion: %s\n"
        "Summary: memprof from the checkout %s (scripts/dev_install.py)\n" % (NAME, VERSION, ROOT))
    (info / "entry_points.txt").write_text("[pytest11]\nmemprof = memprof.pytest_plugin\n")
    (info / "INSTALLER").write_text("memprof scripts/dev_install.py\n")
    (info / "RECORD").write_text("")
    print("dev_install: memprof from %s in %s" % (ROOT / "src" / "wheel", site))


if __name__ == "__main__":
    main()
