#!/bin/sh
# run_under_blas_core.sh <ds-report> <test binary> [args...]: runs the test binary with
# OPENBLAS_CORETYPE set to the core the tools choose on this CPU (`ds-report --blas-core` started
# without the variable; none when the BLAS is not OpenBLAS), and fails unless OpenBLAS really runs
# that core with the variable set (ds-report under the same environment reports it).
set -e
report=$1
shift
core=$(env -u OPENBLAS_CORETYPE -u DS_OPENBLAS_CORETYPE_CHOSEN "$report" --blas-core)
unset DS_OPENBLAS_CORETYPE_CHOSEN DS_OPENBLAS_REEXEC
if [ -n "$core" ]; then
  export OPENBLAS_CORETYPE="$core"
  running=$("$report" --blas-core 2>/dev/null)
  if [ "$running" != "$core" ]; then
    echo "OPENBLAS_CORETYPE=$core but OpenBLAS runs '$running'" >&2
    exit 1
  fi
else
  unset OPENBLAS_CORETYPE
fi
echo "running under OPENBLAS_CORETYPE=${core:-<unset: not OpenBLAS, or no AVX2>}"
exec "$@"
