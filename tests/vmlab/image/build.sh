#!/bin/bash
# The VM lab's guest image, from Debian's packages only (docs/vmlab.md).
#
# build.sh WORK: debootstrap Debian 12 into WORK/rootfs, install the kernel, its headers
# and the lab's packages in one chroot transaction (zfs-dkms then builds the ZFS module
# for the guest's kernel, at native speed), add the lab's init (init.sh, beside this
# script), and write WORK/out: root.raw (ext4, no partition table), vmlinuz, initrd.img,
# packages.txt (dpkg-query of the image) and kernel.txt. tests/support/vmimage.py runs it
# under its lock and publishes WORK/out into the cache; everything this file and init.sh
# say is hashed into the cache key, so any change here makes a new image.
set -euo pipefail
WORK=$1
MIRROR=${SSDLAB_VMLAB_MIRROR:-http://deb.debian.org/debian}
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$WORK/rootfs
OUT=$WORK/out
PACKAGES="linux-image-amd64 linux-headers-amd64 initramfs-tools busybox kmod udev
 mdadm zfs-dkms zfsutils-linux dkms build-essential
 nvme-cli smartmontools hdparm sg3-utils sdparm lsscsi pciutils fio
 util-linux e2fsprogs btrfs-progs xfsprogs iproute2 procps psmisc
 openssh-server python3 python3-venv"

mounted=()
unmount_all() {
  for ((i = ${#mounted[@]} - 1; i >= 0; i--)); do umount -l "${mounted[$i]}" 2>/dev/null || true; done
  mounted=()
}
trap unmount_all EXIT
step() { echo "== $(date +%T) $*"; }

step "debootstrap bookworm (main, contrib) from $MIRROR"
mkdir -p "$OUT"
debootstrap --variant=minbase --components=main,contrib --include=ca-certificates \
  bookworm "$ROOT" "$MIRROR"

step "apt configuration: sources, no recommends, no docs, no services in the chroot"
cat >"$ROOT/etc/apt/sources.list" <<EOF
deb $MIRROR bookworm main contrib
deb $MIRROR bookworm-updates main contrib
deb http://deb.debian.org/debian-security bookworm-security main contrib
EOF
echo 'APT::Install-Recommends "false";' >"$ROOT/etc/apt/apt.conf.d/99vmlab-norecommends"
cat >"$ROOT/etc/dpkg/dpkg.cfg.d/01vmlab-nodoc" <<'EOF'
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/man/*
path-exclude /usr/share/locale/*
path-include /usr/share/locale/locale.alias
path-exclude /usr/share/info/*
EOF
printf '#!/bin/sh\nexit 101\n' >"$ROOT/usr/sbin/policy-rc.d"
chmod 755 "$ROOT/usr/sbin/policy-rc.d"
# a small initrd: what mounts a virtio-blk ext4 root, nothing else (8 MB, not 37: boots faster)
mkdir -p "$ROOT/etc/initramfs-tools/conf.d"
printf 'MODULES=list\nCOMPRESS=gzip\n' >"$ROOT/etc/initramfs-tools/conf.d/vmlab"
printf 'virtio_pci\nvirtio_blk\next4\ncrc32c_generic\n' >>"$ROOT/etc/initramfs-tools/modules"

mount -t proc proc "$ROOT/proc" && mounted+=("$ROOT/proc")
mount -t sysfs sys "$ROOT/sys" && mounted+=("$ROOT/sys")
mount --bind /dev "$ROOT/dev" && mounted+=("$ROOT/dev")
mount -t devpts devpts "$ROOT/dev/pts" && mounted+=("$ROOT/dev/pts")

step "apt-get install (the kernel and its headers in one transaction: dkms builds ZFS for it)"
export DEBIAN_FRONTEND=noninteractive
chroot "$ROOT" apt-get update -q
# shellcheck disable=SC2086
chroot "$ROOT" apt-get install -y -q $PACKAGES
KVER=$(ls "$ROOT/lib/modules" | sort -V | tail -1)
step "guest kernel $KVER; dkms: $(chroot "$ROOT" dkms status | tr '\n' ' ')"
test -e "$ROOT/lib/modules/$KVER/updates/dkms/zfs.ko" || {
  echo "zfs.ko was not built for $KVER" >&2
  exit 1
}
chroot "$ROOT" apt-get clean
rm -rf "$ROOT"/var/lib/apt/lists/*
unmount_all

step "the lab's configuration: init, sshd, hostname, fstab"
install -m 755 "$HERE/init.sh" "$ROOT/sbin/vmlab-init"
cat >"$ROOT/etc/ssh/sshd_config.d/vmlab.conf" <<'EOF'
PermitRootLogin prohibit-password
PasswordAuthentication no
UseDNS no
EOF
install -d -m 700 "$ROOT/root/.ssh"
echo vmlab >"$ROOT/etc/hostname"
printf 'LABEL=vmroot / ext4 rw,errors=remount-ro 0 1\n' >"$ROOT/etc/fstab"
# ssdlab's own venv (the checkout's package goes in at guest start: tests/support/vmlab.py)
chroot "$ROOT" python3 -m venv /opt/ssdlab
ln -s /opt/ssdlab/bin/ssdlab "$ROOT/usr/local/bin/ssdlab"
rm -f "$ROOT/usr/sbin/policy-rc.d"

step "kernel, initrd, package list"
cp "$ROOT/boot/vmlinuz-$KVER" "$OUT/vmlinuz"
cp "$ROOT/boot/initrd.img-$KVER" "$OUT/initrd.img"
chroot "$ROOT" dpkg-query -W -f '${Package} ${Version}\n' >"$OUT/packages.txt"
echo "$KVER" >"$OUT/kernel.txt"

step "root.raw (mkfs.ext4 -d: no loop device, no mount)"
size_mib=$(du -sm "$ROOT" | cut -f1)
mkfs.ext4 -q -F -L vmroot -E root_owner=0:0 -d "$ROOT" "$OUT/root.raw" "$((size_mib + size_mib / 4 + 256))M"
step "done: rootfs $size_mib MiB"
