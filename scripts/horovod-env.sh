#!/usr/bin/env bash
# Make the Horovod environment: a virtualenv (default .horovod) with TensorFlow 2.12
# (CPU) and Horovod 0.28.1 built for it, with Gloo and MPI (OpenMPI) controllers.
#
# Why its own venv: Horovod 0.28.1 (its last release) compiles against neither torch
# 2.13 nor TensorFlow 2.21 (the project venv's), but does against TensorFlow 2.12.
# The build (about 4 minutes on 2 cores) happens once per machine: the wheel is kept
# in $RINGLEADER_WHEEL_CACHE (default ~/.cache/ringleader/wheels), named by the
# versions it was built for, and later runs install it from there.
#   usage: scripts/horovod-env.sh [VENV_DIR]     PYTHON=python3 by default
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
venv="${1:-$here/.horovod}"
python="${PYTHON:-python3}"
horovod=0.28.1
constraints="$here/constraints-horovod.txt"
pyver="$("$python" -c 'import sys; print(f"cp{sys.version_info[0]}{sys.version_info[1]}")')"
cache="${RINGLEADER_WHEEL_CACHE:-$HOME/.cache/ringleader/wheels}/horovod-$horovod-tf2.12.1-$pyver-gloo-mpi"

test -x "$venv/bin/python" || "$python" -m venv "$venv"
"$venv/bin/pip" install -q -c "$constraints" tensorflow-cpu scikit-learn cloudpickle psutil pyyaml \
  packaging wheel
if ! ls "$cache"/horovod-*.whl >/dev/null 2>&1; then
  echo "building Horovod $horovod for TensorFlow 2.12 (once per machine, about 4 minutes)"
  work="$(mktemp -d)"
  trap 'rm -rf "$work"' EXIT
  "$venv/bin/pip" download -q --no-deps --no-binary :all: -d "$work" "horovod==$horovod"
  # -j1: the build's peak memory; Gloo and MPI controllers, TensorFlow only.
  MAKEFLAGS=-j1 HOROVOD_BUILD_PARALLEL=1 CMAKE_BUILD_PARALLEL_LEVEL=1 \
  HOROVOD_WITH_TENSORFLOW=1 HOROVOD_WITHOUT_PYTORCH=1 HOROVOD_WITHOUT_MXNET=1 \
  HOROVOD_WITH_GLOO=1 HOROVOD_WITH_MPI=1 \
    "$venv/bin/pip" wheel -q --no-deps --no-build-isolation -w "$work/wheel" "$work/horovod-$horovod.tar.gz"
  mkdir -p "$cache"  # in whole: a copy cut short must not pass for a wheel next time
  wheel="$(basename "$work"/wheel/horovod-*.whl)"
  cp "$work/wheel/$wheel" "$cache/.$wheel.part" && mv "$cache/.$wheel.part" "$cache/$wheel"
fi
"$venv/bin/pip" install -q --no-deps "$cache"/horovod-*.whl
# ringleader's examples and runtime (standard library only) from this checkout.
site="$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
echo "$here/src" > "$site/ringleader-src.pth"
# `horovodrun` in this environment is ringleader's (launch/horovodrun.py, run by the
# project's venv, or by the workload's Python in a launcher pod); Horovod's own stays
# as horovodrun-upstream (bench/frameworks.py compares the two).
if ! grep -q ringleader "$venv/bin/horovodrun" 2>/dev/null; then
  mv "$venv/bin/horovodrun" "$venv/bin/horovodrun-upstream"
fi
cat > "$venv/bin/horovodrun" <<SCRIPT
#!/bin/sh
# ringleader's horovodrun (scripts/horovod-env.sh); Horovod's own: horovodrun-upstream.
exec "\${RINGLEADER_PYTHON:-${RINGLEADER_VENV:-$here/.venv}/bin/python}" -m ringleader.launch.horovodrun "\$@"
SCRIPT
chmod 755 "$venv/bin/horovodrun"
TF_CPP_MIN_LOG_LEVEL=2 "$venv/bin/python" -c \
  'import horovod.tensorflow as hvd; assert hvd.gloo_built() and hvd.mpi_built()'
touch "$venv/.ringleader-installed"
echo "Horovod $horovod with TensorFlow 2.12 in $venv"
