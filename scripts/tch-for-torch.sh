#!/usr/bin/env bash
# Prints the tch release that binds a torch minor release (its generated C++ compiles against
# that torch's headers), or nothing where none does: then memprof links libtorch itself
# (build/libtorch.rs). One table for setup.sh, build-wheel.sh and the version checks.
#   scripts/tch-for-torch.sh 2.11.0   ->  0.24
# A new tch release that binds a new torch: one line here (docs/install.md, "A new torch").
case "${1%.*}" in
  2.9) echo 0.22 ;;
  2.10) echo 0.23 ;;
  2.11) echo 0.24 ;;
  2.13) echo 0.26 ;;
  *) ;;
esac
