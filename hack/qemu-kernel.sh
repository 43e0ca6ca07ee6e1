#!/usr/bin/env bash
# qemu-kernel.sh — run a static Go test binary inside a throwaway QEMU guest
# that boots Debian's cloud kernel, for dataplane tests that need kernel
# features this machine lacks (IPVS, dummy links). Used by e2e/dataplane/ipvs.
#
#   hack/qemu-kernel.sh prepare               fetch + extract + build the base initramfs (cached)
#   hack/qemu-kernel.sh run BINARY [ARG...]   boot, run BINARY ARG... as the guest's test, print
#                                             the console, exit with the verdict
#   hack/qemu-kernel.sh path                  print the prepared cache directory (no network)
#
# Exit codes: 0 guest test passed, 1 guest test failed, 2 harness failure (no
# verdict: boot failure, timeout, watchdog), 3 prerequisites missing (qemu not
# installed, or no cached kernel and no root/apt to fetch one).
#
# Cache: ${SWITCHYARD_QEMU_CACHE:-~/.cache/switchyard/qemu}/<kernel-version>/
#   vmlinuz, modules/ (the extracted tree + busybox-generated modules.dep),
#   busybox, base-<key>.cpio.gz (busybox, modules, userland, /init)
# and a "current" symlink to the last kernel prepared. Nothing outside the
# cache is written except the temporary per-run directory.
#
# The guest: no network device (-nic none), no disk; the initramfs is the base
# archive concatenated with a per-run archive holding the test binary and its
# arguments. /init mounts proc/sys/dev/run/tmp, loads the netfilter, IPVS,
# bridge, veth and dummy modules (the rest load on demand through
# /sbin/modprobe, overlay among them: containerd's snapshotter in the
# cluster bed run in the guest), sets SWITCHYARD_QEMU_GUEST=1, runs the binary in /tmp,
# prints "SWITCHYARD-GUEST-EXIT <rc>" and powers off. A watchdog powers off
# after the timeout, qemu runs with -no-reboot and panic=-1, and the host side
# kills qemu after the timeout plus a margin, so qemu always exits.
#
# Userland: busybox-static (downloaded), plus this machine's iproute2 `ip`,
# iptables-legacy (xtables-legacy-multi and its extensions), ipset, nft,
# util-linux nsenter and curl, ipvsadm and conntrack, copied with the
# shared libraries `ldd` reports. In the guest, iptables and ip6tables (and -save/-restore) are the
# legacy flavour. nsenter, curl and nft serve the e2e/system scenarios run in
# the guest (launch enters node namespaces with nsenter, the tests read the
# agents' /healthz and /metrics with curl, and an agent's cleanup of the
# nftables mode runs nft). ipvsadm is what the agent's removal of
# kube-proxy's IPVS state runs (dataplane/kubeproxycleanup) and what the
# IPVS hand-over test reads IPVS with; conntrack shows the entries that
# carry established IPVS connections.
#
# Environment:
#   SWITCHYARD_QEMU_CACHE    cache root (default ~/.cache/switchyard/qemu)
#   SWITCHYARD_QEMU_OFFLINE  1: never call apt; use the "current" cached kernel
#   SWITCHYARD_QEMU_FLAVOR   kernel flavour (default cloud-amd64)
#   SWITCHYARD_QEMU_TIMEOUT  guest watchdog in seconds (default 900)
#   SWITCHYARD_QEMU_MEM      guest memory in MiB (default 1024)
#   SWITCHYARD_QEMU_SMP      guest CPUs (default 2)
#   SWITCHYARD_QEMU_ACCEL    tcg | kvm | auto (default auto: kvm only with real vmx/svm)
#   SWITCHYARD_QEMU_LOG      also write the console to this file as it comes
#   SWITCHYARD_QEMU_ADD      a directory whose tree is added to the guest's root for this run
#                            (symlinks followed), e.g. opt/testbed/etcd; it costs guest memory
#   SWITCHYARD_QEMU_ENV      extra environment of the guest's test, one NAME=VALUE a line
set -euo pipefail

# Bump when the base initramfs layout or /init changes (part of its cache key).
LAYOUT_VERSION=6

CACHE_ROOT=${SWITCHYARD_QEMU_CACHE:-${HOME:-/root}/.cache/switchyard/qemu}
FLAVOR=${SWITCHYARD_QEMU_FLAVOR:-cloud-amd64}
TIMEOUT=${SWITCHYARD_QEMU_TIMEOUT:-900}
MEM=${SWITCHYARD_QEMU_MEM:-1024}
SMP=${SWITCHYARD_QEMU_SMP:-2}
ACCEL=${SWITCHYARD_QEMU_ACCEL:-auto}

# Host userland copied into the guest: binary path and the Debian package
# that provides it (for error messages).
HOST_BINS=(/usr/sbin/ip:iproute2 /usr/sbin/xtables-legacy-multi:iptables /usr/sbin/ipset:ipset
  /usr/sbin/nft:nftables /usr/bin/nsenter:util-linux /usr/bin/curl:curl /usr/sbin/ipvsadm:ipvsadm
  /usr/sbin/conntrack:conntrack)
XTABLES_DIR=/usr/lib/x86_64-linux-gnu/xtables

# Modules shipped (plus everything they depend on, from modules.dep): whole
# directories relative to kernel/, and single modules by name.
MODULE_DIRS=(net/netfilter net/ipv4/netfilter net/ipv6/netfilter net/bridge)
MODULE_NAMES=(dummy veth overlay)
# Loaded at boot with their modules.dep dependencies (nf_conntrack, nf_nat,
# libcrc32c, …). The kernel loads the rest on demand through /sbin/modprobe
# (busybox, reading modules.dep and modules.alias): IPVS schedulers, ipset
# types, xt matches and targets, ip6 tables. br_netfilter must be there
# before a topology sets bridge-nf-call-iptables; nf_conntrack_netlink is
# only ever asked for by a netlink family alias.
PRELOAD=(ip_vs ip_vs_rr dummy veth bridge br_netfilter nf_conntrack_netlink ip_tables iptable_filter iptable_nat
  ip_set xt_set xt_conntrack xt_MASQUERADE xt_mark xt_comment xt_addrtype)

log() { echo "qemu-kernel: $*" >&2; }
die() { local code=$1; shift; log "$*"; exit "$code"; }

# ---- prerequisites ----------------------------------------------------------

need_qemu() {
  command -v qemu-system-x86_64 >/dev/null ||
    die 3 "qemu-system-x86_64 not found: apt-get install --no-install-recommends qemu-system-x86"
}

can_apt() { [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null && [ -z "${SWITCHYARD_QEMU_OFFLINE:-}" ]; }

# kernel_package prints linux-image-<version>-<flavour>, the package the
# flavour's meta package depends on, updating apt's lists once if needed.
kernel_package() {
  local pkg
  pkg=$(apt-cache depends "linux-image-$FLAVOR" 2>/dev/null | awk '/Depends: linux-image-/{print $2; exit}')
  if [ -z "$pkg" ]; then
    log "apt lists know no linux-image-$FLAVOR; running apt-get update"
    timeout 300 apt-get update -qq >&2
    pkg=$(apt-cache depends "linux-image-$FLAVOR" | awk '/Depends: linux-image-/{print $2; exit}')
  fi
  [ -n "$pkg" ] || die 3 "cannot resolve linux-image-$FLAVOR with apt-cache"
  echo "$pkg"
}

# download PKG... into $CACHE_ROOT/debs, updating apt's lists once on failure
# (a stale list names a version the mirror no longer has).
download() {
  mkdir -p "$CACHE_ROOT/debs"
  local d="$CACHE_ROOT/debs"
  # apt-get warns that root downloads unsandboxed: not news here.
  if ! (cd "$d" && timeout 600 apt-get download -q "$@" 2>&1 | { grep -v 'unsandboxed' >&2 || true; }); then
    log "apt-get download $* failed; running apt-get update and retrying"
    timeout 300 apt-get update -qq >&2
    (cd "$d" && timeout 600 apt-get download -q "$@" 2>&1 | { grep -v 'unsandboxed' >&2 || true; }) ||
      die 3 "apt-get download $* failed"
  fi
}

# ---- kernel, modules, busybox (cached per kernel version) --------------------

# prepare_kernel sets KDIR to a complete $CACHE_ROOT/<kver> directory.
prepare_kernel() {
  local pkg kver
  if ! can_apt; then
    KDIR=$(readlink -f "$CACHE_ROOT/current" 2>/dev/null || true)
    [ -n "$KDIR" ] && [ -f "$KDIR/complete" ] ||
      die 3 "no cached guest kernel in $CACHE_ROOT and cannot fetch one (needs root and apt-get; run: sudo hack/qemu-kernel.sh prepare)"
    return
  fi
  # apt-cache is slow on a busy machine: reuse its answer for a day.
  if [ -n "$(find "$CACHE_ROOT/resolved" -mmin -1440 2>/dev/null)" ] &&
    [ -f "$CACHE_ROOT/$(cat "$CACHE_ROOT/resolved")/complete" ]; then
    pkg=linux-image-$(cat "$CACHE_ROOT/resolved")
  else
    pkg=$(kernel_package)
  fi
  kver=${pkg#linux-image-}
  KDIR=$CACHE_ROOT/$kver
  if [ ! -f "$KDIR/complete" ]; then
    log "fetching $pkg and busybox-static into $CACHE_ROOT/debs"
    rm -f "$CACHE_ROOT"/debs/"$pkg"_*.deb "$CACHE_ROOT"/debs/busybox-static_*.deb
    download "$pkg" busybox-static
    rm -rf "$KDIR" "$KDIR.tmp" && mkdir -p "$KDIR.tmp/x"
    dpkg-deb -x "$CACHE_ROOT"/debs/"$pkg"_*.deb "$KDIR.tmp/x"
    dpkg-deb -x "$CACHE_ROOT"/debs/busybox-static_*.deb "$KDIR.tmp/x"
    mv "$KDIR.tmp/x/boot/vmlinuz-$kver" "$KDIR.tmp/vmlinuz"
    mv "$KDIR.tmp/x/lib/modules/$kver" "$KDIR.tmp/modules"
    mv "$KDIR.tmp/x/bin/busybox" "$KDIR.tmp/busybox"
    rm -rf "$KDIR.tmp/x"
    # busybox depmod wants <base>/lib/modules/<kver>: point a scratch tree at ours.
    mkdir -p "$KDIR.tmp/d/lib/modules"
    ln -s ../../../modules "$KDIR.tmp/d/lib/modules/$kver"
    "$KDIR.tmp/busybox" depmod -b "$KDIR.tmp/d" "$kver"
    rm -rf "$KDIR.tmp/d"
    echo "$kver" > "$KDIR.tmp/complete"
    mv "$KDIR.tmp" "$KDIR"
    rm -f "$CACHE_ROOT"/debs/"$pkg"_*.deb  # extracted; keep the cache small
  fi
  ln -sfn "$kver" "$CACHE_ROOT/current"
  echo "$kver" > "$CACHE_ROOT/resolved"
}

# ---- base initramfs ---------------------------------------------------------

# module_closure prints the module files (relative to modules/) to ship: the
# configured directories and names plus their modules.dep dependencies.
module_closure() {
  local m=$KDIR/modules
  {
    for d in "${MODULE_DIRS[@]}"; do (cd "$m" && find "kernel/$d" -name '*.ko'); done
    for n in "${MODULE_NAMES[@]}"; do (cd "$m" && find kernel -name "$n.ko"); done
  } | sort -u > "$WORK/roots"
  # modules.dep lines: "kernel/a.ko: kernel/b.ko kernel/c.ko" (transitively closed).
  awk -F': *' 'NR==FNR{want[$1]=1; next} ($1 in want){print $1; n=split($2,d," "); for(i=1;i<=n;i++) print d[i]}' \
    "$WORK/roots" "$m/modules.dep" | sort -u
}

# copy_with_libs copies executables and libraries into root $1 at the same
# paths, with every library ldd reports for them (few processes: this runs
# on machines that are busy).
copy_with_libs() {
  local root=$1; shift
  cp -L --parents "$@" "$root/"
  # shellcheck disable=SC2046
  cp -L --parents $(printf '%s\n' "$@" | xargs -P 4 -n 16 ldd |
    awk '/=> \//{print $3} /^\t\/lib/{print $1}' | sort -u) "$root/"
}

write_init() {
  cat > "$1" <<'EOF'
#!/bin/sh
# /init of the switchyard test guest (written by hack/qemu-kernel.sh).
/bin/busybox --install -s /bin
export PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/tmp TMPDIR=/tmp
mount -t proc proc /proc; mount -t sysfs sysfs /sys; mount -t devtmpfs devtmpfs /dev 2>/dev/null
mount -t tmpfs tmpfs /run; mount -t tmpfs tmpfs /tmp; mkdir -p /run/netns
dmesg -n 1
. /etc/guest/env
(sleep "$GUEST_TIMEOUT"; echo "SWITCHYARD-GUEST-WATCHDOG after ${GUEST_TIMEOUT}s"; poweroff -f) &
echo "SWITCHYARD-GUEST-UP kernel=$(uname -r) uptime=$(cut -d' ' -f1 /proc/uptime)s"
modprobe -a $(cat /etc/modules.preload) || echo "SWITCHYARD-GUEST-MODPROBE-FAILED $(cat /etc/modules.preload)"
ip link set lo up
export SWITCHYARD_QEMU_GUEST=1 GOTRACEBACK=all
cd /tmp
echo "SWITCHYARD-GUEST-BEGIN uptime=$(cut -d' ' -f1 /proc/uptime)s"
# One argument per line in /etc/guest/args.
set --
while IFS= read -r a; do set -- "$@" "$a"; done < /etc/guest/args
/guest.test "$@"
rc=$?
[ "$rc" = 0 ] || { echo "SWITCHYARD-GUEST-DMESG (last 40 lines)"; dmesg | tail -n 40; }
echo "SWITCHYARD-GUEST-EXIT $rc uptime=$(cut -d' ' -f1 /proc/uptime)s"
sync
poweroff -f
EOF
  chmod +x "$1"
}

# base_key hashes everything the base archive is built from.
base_key() {
  {
    echo "$LAYOUT_VERSION ${PRELOAD[*]} ${MODULE_DIRS[*]} ${MODULE_NAMES[*]}"
    cat "$KDIR/complete"
    for hb in "${HOST_BINS[@]}"; do stat -c '%n %s %Y' "$(readlink -f "${hb%%:*}")"; done
    stat -c '%n %s %Y' "$XTABLES_DIR"/*.so
    declare -f write_init copy_with_libs module_closure prepare_base
  } | sha256sum | cut -c1-16
}

# prepare_base sets BASE to the cached base archive, building it if missing.
prepare_base() {
  local hb missing=""
  for hb in "${HOST_BINS[@]}"; do [ -x "${hb%%:*}" ] || missing="$missing ${hb#*:}"; done
  [ -d "$XTABLES_DIR" ] || missing="$missing iptables"
  [ -z "$missing" ] || die 3 "guest userland comes from this machine; missing:$missing (apt-get install$missing)"
  BASE=$KDIR/base-$(base_key).cpio.gz
  [ -f "$BASE" ] && return
  log "building base initramfs $BASE"
  local r=$WORK/base m kver
  kver=$(cat "$KDIR/complete")
  mkdir -p "$r"/{bin,sbin,usr/bin,usr/sbin,proc,sys,dev,run,tmp,etc/guest,lib64,"lib/modules/$kver"}
  mkdir -p "$r/var" && ln -s /run "$r/var/run"
  # /init installs the other applet links (busybox --install -s) in the guest.
  cp "$KDIR/busybox" "$r/bin/busybox"
  ln -s busybox "$r/bin/sh"
  ln -s ../bin/busybox "$r/sbin/modprobe"   # the kernel's request_module() runs /sbin/modprobe
  # Modules and a modules.dep / modules.alias for exactly the shipped set.
  module_closure > "$WORK/mods"
  # shellcheck disable=SC2046
  (cd "$KDIR/modules" && cp --parents $(cat "$WORK/mods") "$r/lib/modules/$kver/")
  "$KDIR/busybox" depmod -b "$r" "$kver"
  printf '%s\n' "${PRELOAD[@]}" > "$r/etc/modules.preload"
  # Userland from this machine.
  local bins=()
  for hb in "${HOST_BINS[@]}"; do bins+=("${hb%%:*}"); done
  copy_with_libs "$r" "${bins[@]}" "$XTABLES_DIR"/*.so
  for t in iptables ip6tables; do
    for s in "" -save -restore; do
      ln -sf xtables-legacy-multi "$r/usr/sbin/$t$s"
      ln -sf xtables-legacy-multi "$r/usr/sbin/$t-legacy$s"
    done
  done
  [ -e "$r/lib64/ld-linux-x86-64.so.2" ] || cp -L /lib64/ld-linux-x86-64.so.2 "$r/lib64/"
  # ipset and iptables resolve protocol and service names through these.
  for f in /etc/protocols /etc/services; do [ -f "$f" ] && cp "$f" "$r$f"; done
  [ -f "$r/etc/protocols" ] || printf '%s\n' 'ip 0 IP' 'icmp 1 ICMP' 'tcp 6 TCP' 'udp 17 UDP' \
    'ipv6-icmp 58 IPv6-ICMP' 'sctp 132 SCTP' > "$r/etc/protocols"
  # Go resolves "localhost" through /etc/hosts (the apiserver's clients, TLS names).
  printf '%s\n' '127.0.0.1 localhost' '::1 localhost' > "$r/etc/hosts"
  echo 'root:x:0:0:root:/tmp:/bin/sh' > "$r/etc/passwd"
  echo 'root:x:0:' > "$r/etc/group"
  write_init "$r/init"
  (cd "$r" && find . | sort | "$KDIR/busybox" cpio -o -H newc 2>/dev/null | gzip -1 > "$BASE.tmp")
  # The per-run archive is appended uncompressed: it must start 4-byte aligned
  # (the kernel skips the zero padding between archives).
  truncate -s %512 "$BASE.tmp"
  mv "$BASE.tmp" "$BASE"
  log "base initramfs $(du -k "$BASE" | cut -f1) KiB ($(wc -l < "$WORK/mods") modules)"
}

# prepare runs prepare_kernel and prepare_base holding the cache's lock, so
# concurrent runs (two test binaries, two engineers) build things once.
prepare() {
  mkdir -p "$CACHE_ROOT"
  exec 9>"$CACHE_ROOT/.lock"
  flock 9
  prepare_kernel
  prepare_base
  flock -u 9
}

# ---- per-run archive and boot -----------------------------------------------

# run_archive writes $WORK/run.cpio: the test binary and its arguments,
# uncompressed (the kernel copies it; compressing 20 MB costs more than it
# saves), then SWITCHYARD_QEMU_ADD's tree as a second archive.
run_archive() {
  local bin=$1; shift
  local r=$WORK/run
  mkdir -p "$r/etc/guest"
  cp "$bin" "$r/guest.test" && chmod +x "$r/guest.test"
  : > "$r/etc/guest/args"
  local a
  for a in "$@"; do
    case $a in *$'\n'*) die 2 "guest arguments must not contain newlines: $a";; esac
    printf '%s\n' "$a" >> "$r/etc/guest/args"
  done
  echo "GUEST_TIMEOUT=$TIMEOUT" > "$r/etc/guest/env"
  # /init sources this file: each extra variable is exported, quoted.
  while IFS= read -r a; do
    [ -n "$a" ] || continue
    case $a in [A-Za-z_]*=*) ;; *) die 2 "SWITCHYARD_QEMU_ENV: want NAME=VALUE, got: $a";; esac
    printf 'export %s=%q\n' "${a%%=*}" "${a#*=}" >> "$r/etc/guest/env"
  done <<< "${SWITCHYARD_QEMU_ENV:-}"
  (cd "$r" && find . | sort | "$KDIR/busybox" cpio -o -H newc 2>/dev/null > "$WORK/run.cpio")
  if [ -n "${SWITCHYARD_QEMU_ADD:-}" ]; then
    [ -d "$SWITCHYARD_QEMU_ADD" ] || die 2 "SWITCHYARD_QEMU_ADD=$SWITCHYARD_QEMU_ADD is not a directory"
    # Concatenated archives must each start 4-byte aligned.
    truncate -s %512 "$WORK/run.cpio"
    (cd "$SWITCHYARD_QEMU_ADD" && find . -mindepth 1 | sort | "$KDIR/busybox" cpio -o -H newc -L 2>/dev/null >> "$WORK/run.cpio") ||
      die 2 "cannot archive SWITCHYARD_QEMU_ADD=$SWITCHYARD_QEMU_ADD"
    log "added $SWITCHYARD_QEMU_ADD: $(du -m "$WORK/run.cpio" | cut -f1) MiB with the test binary"
  fi
}

pick_accel() {
  if [ "$ACCEL" = auto ]; then
    # /dev/kvm backed by a nested "PVM" cannot boot a stock kernel: KVM only with real vmx/svm.
    if [ -w /dev/kvm ] && grep -qwE 'vmx|svm' /proc/cpuinfo && [ ! -d /sys/module/kvm_pvm ]; then
      ACCEL=kvm
    else
      ACCEL=tcg
    fi
  fi
}

boot() {
  local qa=(-accel tcg -cpu max)
  [ "$ACCEL" = kvm ] && qa=(-accel kvm -cpu host)
  cat "$BASE" "$WORK/run.cpio" > "$WORK/initrd"
  local start=$SECONDS rc=0
  # The host-side timeout backs up the guest watchdog; -nic none: no network device at all.
  # tr is line-buffered (stdbuf) so that SWITCHYARD_QEMU_LOG shows a long run as it goes,
  # not 4 KiB at a time.
  timeout --kill-after=10 $((TIMEOUT + 60)) qemu-system-x86_64 "${qa[@]}" -M pc -m "$MEM" -smp "$SMP" \
    -nodefaults -no-user-config -nic none -display none -monitor none -serial stdio -no-reboot \
    -kernel "$KDIR/vmlinuz" -initrd "$WORK/initrd" \
    -append "console=ttyS0 panic=-1 quiet loglevel=3 mitigations=off" \
    </dev/null 2>&1 | stdbuf -oL tr -d '\r' | tee "$WORK/console.log" ${SWITCHYARD_QEMU_LOG:+"$SWITCHYARD_QEMU_LOG"} || rc=$?
  log "qemu exited (status $rc) after $((SECONDS - start))s, accel $ACCEL"
}

verdict() {
  local line rc
  line=$(grep -a '^SWITCHYARD-GUEST-EXIT ' "$WORK/console.log" | tail -n 1 || true)
  if [ -z "$line" ]; then
    grep -aq '^SWITCHYARD-GUEST-WATCHDOG' "$WORK/console.log" && die 2 "guest watchdog fired after ${TIMEOUT}s"
    grep -aq '^SWITCHYARD-GUEST-UP' "$WORK/console.log" || die 2 "guest did not boot (no SWITCHYARD-GUEST-UP on the console)"
    die 2 "guest gave no verdict (crashed or killed)"
  fi
  rc=$(echo "$line" | awk '{print $2}')
  if [ "$rc" = 0 ]; then log "VERDICT: PASS"; exit 0; fi
  log "VERDICT: FAIL (guest test exit status $rc)"
  exit 1
}

main() {
  local cmd=${1:-}
  [ $# -gt 0 ] && shift
  case $cmd in
    prepare)
      need_qemu
      WORK=$(mktemp -d); trap 'rm -rf "$WORK"' EXIT
      prepare
      echo "$KDIR"
      ;;
    path)
      KDIR=$(readlink -f "$CACHE_ROOT/current" 2>/dev/null || true)
      [ -n "$KDIR" ] && [ -f "$KDIR/complete" ] || die 3 "no prepared kernel in $CACHE_ROOT"
      echo "$KDIR"
      ;;
    run)
      [ $# -ge 1 ] || die 2 "usage: $0 run BINARY [ARG...]"
      local bin=$1; shift
      [ -x "$bin" ] || die 2 "test binary $bin is not executable"
      need_qemu
      WORK=$(mktemp -d); trap 'rm -rf "$WORK"' EXIT
      prepare
      run_archive "$bin" "$@"
      pick_accel
      log "booting $(cat "$KDIR/complete") ($ACCEL, ${SMP} cpu, ${MEM} MiB, watchdog ${TIMEOUT}s)"
      boot
      verdict
      ;;
    *) die 2 "usage: $0 prepare | path | run BINARY [ARG...]";;
  esac
}

main "$@"
