#!/usr/bin/env bash
# Prints the tch release that binds a torch minor release (its generated C++ compiles against
# that torch's headers), or nothing where none does: then memprof's build finds libtorch itself
# (build/libtorch.rs). Read from the one table of torch releases, src/torch/releases.tsv.
#   scripts/tch-for-torch.sh 2.11.0   ->  0.24
cd "$(dirname "$0")/.."
minor=$(echo "$1" | cut -d. -f1,2)
awk -F'\t' -v m="$minor" '!/^#/ && $1 == m && $3 != "-" { print $3 }' src/torch/releases.tsv
