#!/usr/bin/env bash
# Installs everything Lockstep builds, tests and benchmarks against.
# Idempotent: a second run on a ready machine only checks.
set -euo pipefail

PKGS=(mariadb-server mariadb-client mariadb-backup mariadb-test galera-4
      sysbench rsync socat lsof iproute2 procps fonts-dejavu-core
      python3 python3-pymysql openssl fuse3 util-linux libfaketime
      haproxy keepalived gdb)
      # python3: the WAN emulator (make wan-bench); python3-pymysql: README's
      # retry loop, run by tests/demo.rs; openssl: the encrypted-key test
      # makes its key with the openssl command; fuse3: the power-loss file
      # system (crates/lockstep-lazyfs) mounts through /dev/fuse;
      # util-linux: its tests run a writer as another user with setpriv;
      # libfaketime: the clock nemeses (a node's clock fast, slow, leaping);
      # haproxy, keepalived: the failover runs put them in front of clusters;
      # gdb: the testkit takes a hung node's thread stacks before killing it

missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if ((${#missing[@]})); then
  SUDO=""
  [[ $(id -u) -eq 0 ]] || SUDO="sudo"
  echo "setup: installing ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  # The packaged server starts itself on install; our clusters use their own
  # datadirs and ports, so keep the system instance out of the way.
  if command -v systemctl >/dev/null && systemctl is-active --quiet mariadb 2>/dev/null; then
    $SUDO systemctl stop mariadb || true
  fi
  # Without systemd the package's init script started it: stop that one
  # only. Servers of our clusters (started with --defaults-file, perhaps by
  # a test running this script through `make demo`) are left alone.
  [[ -x /etc/init.d/mariadb ]] && $SUDO /etc/init.d/mariadb stop >/dev/null 2>&1 || true
  # haproxy and keepalived start as services on install too; the failover
  # runs start their own, with their own configuration files.
  for svc in haproxy keepalived; do
    if command -v systemctl >/dev/null && systemctl is-active --quiet "$svc" 2>/dev/null; then
      $SUDO systemctl disable --now "$svc" >/dev/null 2>&1 || true
    fi
    [[ -x /etc/init.d/$svc ]] && $SUDO /etc/init.d/$svc stop >/dev/null 2>&1 || true
  done
  for pid in $(pgrep -x mariadbd || true); do
    tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q -- '--defaults-file=' || $SUDO kill "$pid" 2>/dev/null || true
  done
fi

# Everything the tests start must be there now: a missing piece fails here,
# loudly, instead of turning into skipped or confusing test failures later.
fail() { echo "setup: FAILED: $*" >&2; exit 1; }
GALERA_LIB=/usr/lib/galera/libgalera_smm.so
PATH=$PATH:/usr/sbin
for bin in mariadbd mariadb mariadb-install-db mariabackup sysbench rsync socat lsof openssl fusermount3 setpriv haproxy keepalived gdb; do
  command -v "$bin" >/dev/null || fail "$bin not found after installing ${PKGS[*]}"
done
[[ -f $GALERA_LIB ]] || fail "$GALERA_LIB (package galera-4) missing: the Galera reference tests need it"
[[ -d /usr/share/mysql/mysql-test/suite/galera ]] || fail "MariaDB's galera mtr suite (package mariadb-test) missing"
[[ -c /dev/fuse ]] || fail "/dev/fuse missing: the power-loss tests need FUSE (modprobe fuse)"
command -v cargo >/dev/null || fail "cargo not found; install Rust (rustup) first"
rustup component list --installed 2>/dev/null | grep -q clippy || rustup component add clippy rustfmt 2>/dev/null || true
echo "setup: ok (mariadbd $(mariadbd --version | awk '{print $3}'), galera $GALERA_LIB)"
