# Sourced by the scripts that set up a Python and torch stack (setup.sh, build-wheel.sh,
# wheel-check.sh, torch-versions-check.sh): finding a Python, making a venv, and which tch the
# manifest names. Run from the project root.

# The path of a Python: `3.13` means python3.13 on PATH, else pyenv's 3.13.x; a path is itself.
# Prints nothing and fails where there is none.
find_python() {
  case "$1" in
    /*) echo "$1" ;;
    *) local p
       for p in "python$1" "$HOME"/.pyenv/versions/"$1".*/bin/python"$1"; do
         if "$p" -c 'import sys' 2>/dev/null; then echo "$p"; return 0; fi
       done
       return 1 ;;
  esac
}

# A venv of Python $1 at $2 with pip; where that Python has no ensurepip (Debian's without
# python3-venv), pip comes from the project's .venv, pointed at it (`pip --python`).
make_venv() {
  if ! "$1" -m venv "$2" >/dev/null 2>&1; then
    rm -rf "$2" && "$1" -m venv --without-pip "$2"
    .venv/bin/python -m pip --quiet --disable-pip-version-check --python "$2/bin/python" install pip
  fi
}

# The tch release Cargo.toml names (the `tch` feature's; scripts/tch-for-torch.sh says which
# torch each binds).
manifest_tch() {
  grep -Po '^tch = \{ version = "\K[^"]+' Cargo.toml
}

# pip install into the venv of Python $1, one distribution at a time: pip resolves first
# (--dry-run --report), then installs each name==version without its dependencies. A CUDA
# torch's wheels (about 3 GB) would otherwise all lie downloaded beside what pip has already
# unpacked until it ends, and CI's disk (its free space varies by machine) ran out there.
pip_install_lean() {
  local python=$1; shift
  local report
  report=$(mktemp "${TMPDIR:-/tmp}/memprof-pip-report.XXXXXX")
  "$python" -m pip install --quiet --disable-pip-version-check --dry-run \
    --report "$report" "$@"
  "$python" -c '
import json, sys
for item in json.load(open(sys.argv[1]))["install"]:
    print(item["metadata"]["name"] + "==" + item["metadata"]["version"])' "$report" |
    while read -r requirement; do
      "$python" -m pip install --quiet --disable-pip-version-check --no-deps "$requirement" </dev/null
    done
  rm -f "$report"
}
