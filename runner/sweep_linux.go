package runner

import (
	"time"

	"golang.org/x/sys/unix"
)

// timestampSlack is how much earlier than the run's start a change time
// may read: the kernel stamps inodes with a coarse clock (up to a tick
// behind), and some filesystems keep whole or even two seconds.
func timestampSlack(fd int) time.Duration {
	var st unix.Statfs_t
	if err := unix.Fstatfs(fd, &st); err == nil {
		switch uint32(st.Type) {
		case unix.EXT4_SUPER_MAGIC, unix.XFS_SUPER_MAGIC, unix.BTRFS_SUPER_MAGIC, unix.TMPFS_MAGIC,
			unix.OVERLAYFS_SUPER_MAGIC, unix.F2FS_SUPER_MAGIC, 0x2fc12fc1 /* zfs */, unix.BCACHEFS_SUPER_MAGIC:
			return 50 * time.Millisecond
		}
	}
	return 2 * time.Second
}
