#!/usr/bin/env bash
# Runs on the device, last in a call: folds everything under $OUT into $OUT/round.tgz (the device
# tool brings back at most 8 files). Unpack here with tar -xzf.
set -eu
OUT=${OUT:-/tmp/out}
tar -C "$OUT" -czf /tmp/round.tgz . && rm -rf "${OUT:?}"/* && mv /tmp/round.tgz "$OUT/round.tgz"
ls -l "$OUT"
