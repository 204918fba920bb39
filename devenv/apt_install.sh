#!/bin/sh
# apt-get update, then apt-get install of the packages named: the Makefile's system-deps
# targets. Another apt-get (unattended-upgrades on a fresh machine, a second make) is waited
# for, up to APT_LOCK_TIMEOUT seconds (default 300), instead of failing on its lock: install
# waits itself (DPkg::Lock::Timeout, apt 1.9.11 and later), but update does not wait for the
# package lists' lock (apt 2.6), so it is tried again while that lock is its only error.
set -eu
timeout="${APT_LOCK_TIMEOUT:-300}"
poll="${APT_LOCK_POLL:-5}"
waited=0
while ! out="$(apt-get update -qq 2>&1)"; do
  case "$out" in
    *"Could not get lock"* | *"Unable to lock"*) ;;
    *) printf '%s\n' "$out" >&2; exit 1 ;;
  esac
  if [ "$waited" -ge "$timeout" ]; then
    printf '%s\n' "$out" >&2
    echo "==> another apt-get still holds the package lists after ${timeout} s: run make again when it ends (or set APT_LOCK_TIMEOUT)" >&2
    exit 1
  fi
  [ "$waited" -gt 0 ] || echo "==> waiting for another apt-get to finish (up to ${timeout} s)" >&2
  sleep "$poll"
  waited=$((waited + poll))
done
[ -z "$out" ] || printf '%s\n' "$out" >&2
DEBIAN_FRONTEND=noninteractive apt-get -o "DPkg::Lock::Timeout=$timeout" install -y -qq \
  --no-install-recommends "$@" >/dev/null
