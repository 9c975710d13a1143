#!/bin/sh
# PID 1 of a VM lab guest (/sbin/vmlab-init, booted with init=/sbin/vmlab-init): mounts,
# udev, the network, the SSH key the host passed by -fw_cfg, sshd. No systemd: under
# QEMU's software emulation it takes about four times as long to boot.
export PATH=/usr/sbin:/usr/bin:/sbin:/bin
say() { echo "vmlab-init: $* ($(cut -d' ' -f1 /proc/uptime) s)" >/dev/console; }
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev 2>/dev/null
mkdir -p /dev/pts /dev/shm
mount -t devpts devpts /dev/pts
for dir in /run /dev/shm /tmp; do mount -t tmpfs tmpfs "$dir"; done
mount -o remount,rw /
hostname vmlab
say mounted
/lib/systemd/systemd-udevd --daemon
udevadm trigger --action=add --type=subsystems
udevadm trigger --action=add --type=devices
ip link set lo up
# virtio_net comes from udev, later than this script: wait for the NIC (10 s at most)
modprobe virtio_net 2>/dev/null
for _ in $(seq 100); do ls /sys/class/net | grep -qv '^lo$' && break; sleep 0.1; done
for path in /sys/class/net/*; do
  nic=${path##*/}
  [ "$nic" = lo ] && continue
  ip link set "$nic" up
  ip addr add 10.0.2.15/24 dev "$nic"
  ip route add default via 10.0.2.2 dev "$nic"
  break
done
# the host's key for this guest: -fw_cfg name=opt/ssdlab/authorized_keys,file=KEY.pub
modprobe qemu_fw_cfg
key=/sys/firmware/qemu_fw_cfg/by_name/opt/ssdlab/authorized_keys/raw
if [ -r "$key" ]; then
  install -m 600 "$key" /root/.ssh/authorized_keys
else
  say "no SSH key given (-fw_cfg name=opt/ssdlab/authorized_keys,...)"
fi
mkdir -p /run/sshd
/usr/sbin/sshd -E /run/sshd.log
say "sshd up"
udevadm settle -t 60
say "udev settled"
# reap orphans for ever; the host ends the guest by QMP quit
while :; do
  wait
  sleep 1
done
