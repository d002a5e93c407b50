# Sourced by the multi-host tests: test hosts up (or exit 77 where the machine does not allow them),
# a work folder removed at exit, and the helpers the tests share. Needs BUILD and N set.
HERE=$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")
ROOT=$(readlink -f "$HERE/../..")
HOSTS="$ROOT/scripts/testhosts.sh"
export DS_TESTHOSTS_DIR=/tmp/ds_testhosts_ctest
WORK=$(mktemp -d /tmp/ds_multihost.XXXXXX)
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

if ! why=$("$HOSTS" check 2>&1); then
  echo "SKIP: $why"
  exit 77
fi
fail() { echo "FAIL: $*" >&2; exit 1; }
cleanup() { nft delete table netdev ds_loss 2>/dev/null; "$HOSTS" down >/dev/null 2>&1; rm -rf "$WORK"; }
trap cleanup EXIT
"$HOSTS" up "$N" || fail "testhosts up $N"
OPTS=$(cat "$DS_TESTHOSTS_DIR/mpirun_options")
HOSTFILE="$DS_TESTHOSTS_DIR/hostfile"
elapsed() { echo $(( $(date +%s) - $1 )); }
losses() { grep -o 'loss=[0-9.]*, loss_scale' "$1"; }
