package runner

import (
	"fmt"
	"runtime"
	"unsafe"

	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// The seccomp filter applied to the user's command (and everything it
// starts), never to our own PID 1. Default allow; each entry below returns an
// error instead of running, with the reason it is blocked:
//
//	socket(AF_UNIX)            reach host services through a unix socket
//	                           that is visible or passed in (docker.sock,
//	                           an ssh or gpg agent, D-Bus)
//	socket(AF_VSOCK)           talk to the hypervisor host on a VM
//	socket(AF_PACKET, AF_ALG)  raw frames, kernel crypto attack surface
//	io_uring_setup/enter/register
//	                           IORING_OP_SOCKET and friends bypass the
//	                           socket rule, and io_uring is a frequent
//	                           source of kernel exploits
//	clone/unshare with CLONE_NEW* flags, setns
//	                           new namespaces (a new user namespace
//	                           regains capabilities over its own mounts)
//	clone3                     ENOSYS: its flags live in memory seccomp cannot
//	                           read, so libc falls back to clone
//	mount, umount2, pivot_root, chroot, open_tree, move_mount, fsopen,
//	fsconfig, fsmount, fspick, mount_setattr
//	                           reshape the filesystem view
//	ptrace, process_vm_readv/writev
//	                           read or steer other processes
//	keyctl, add_key, request_key
//	                           the kernel keyring is not namespaced
//	bpf, perf_event_open, userfaultfd
//	                           kernel attack surface and side channels
//	ioctl(TIOCSTI, TIOCLINUX)  inject input into a terminal
//	kexec_*, *_module, acct, swapon/off, reboot, quotactl,
//	open_by_handle_at, name_to_handle_at
//	                           host administration; handle opens escape
//	                           bind mounts
//	socketpair(AF_UNIX, SOCK_DGRAM)
//	                           a datagram socket, even one of a pair,
//	                           sends to any path with sendto(): it would
//	                           reach a host datagram socket (journald,
//	                           syslog) in any readable directory
//	chmod, fchmod, fchmodat, fchmodat2 with S_ISUID or S_ISGID; open,
//	openat, creat with O_CREAT or O_TMPFILE and those bits; mknod,
//	mknodat with them
//	                           a setuid or setgid file in a writable path
//	                           outlives the run on the host, where any
//	                           local user could run it as the sandbox's uid
//	openat2                    ENOSYS: its mode lives in memory seccomp
//	                           cannot read; libc and runtimes use openat
//
// With noFallocate (Spec.NoFallocate: a data session whose workspace is a
// directory under a watched quota), also:
//
//	fallocate                  EOPNOTSUPP: blocks reserved without a write
//	                           (40 x 100 MiB in 23 ms, or kept past the
//	                           file's size outside RLIMIT_FSIZE with
//	                           FALLOC_FL_KEEP_SIZE); glibc's
//	                           posix_fallocate then writes them
//	ioctl(XFS_IOC_RESVSP*, XFS_IOC_ALLOCSP*, XFS_IOC_ZERO_RANGE)
//	                           the same on XFS (EPERM)
//
// Not blocked, on purpose: socketpair(AF_UNIX) of streams and seqpackets
// (a connected pair reaches nothing outside; Python's multiprocessing needs
// it), AF_NETLINK (the sandbox's own network namespace has only loopback),
// AF_INET/AF_INET6 (the network namespace is the boundary; the proxy
// enforces the allow-list).
//
// A foreign architecture (32-bit x86 on amd64) kills the process, and on
// amd64 the x32 ABI returns ENOSYS.
var (
	blockedSyscalls = []uint32{
		unix.SYS_IO_URING_SETUP, unix.SYS_IO_URING_ENTER, unix.SYS_IO_URING_REGISTER,
		unix.SYS_SETNS,
		unix.SYS_MOUNT, unix.SYS_UMOUNT2, unix.SYS_PIVOT_ROOT, unix.SYS_CHROOT,
		unix.SYS_OPEN_TREE, unix.SYS_MOVE_MOUNT, unix.SYS_FSOPEN, unix.SYS_FSCONFIG,
		unix.SYS_FSMOUNT, unix.SYS_FSPICK, unix.SYS_MOUNT_SETATTR,
		unix.SYS_PTRACE, unix.SYS_PROCESS_VM_READV, unix.SYS_PROCESS_VM_WRITEV,
		unix.SYS_KEYCTL, unix.SYS_ADD_KEY, unix.SYS_REQUEST_KEY,
		unix.SYS_BPF, unix.SYS_PERF_EVENT_OPEN, unix.SYS_USERFAULTFD,
		unix.SYS_KEXEC_LOAD, unix.SYS_KEXEC_FILE_LOAD,
		unix.SYS_INIT_MODULE, unix.SYS_FINIT_MODULE, unix.SYS_DELETE_MODULE,
		unix.SYS_ACCT, unix.SYS_SWAPON, unix.SYS_SWAPOFF, unix.SYS_REBOOT, unix.SYS_QUOTACTL,
		unix.SYS_OPEN_BY_HANDLE_AT, unix.SYS_NAME_TO_HANDLE_AT,
	}
	blockedSocketDomains = []uint32{unix.AF_UNIX, unix.AF_VSOCK, unix.AF_PACKET, unix.AF_ALG}
	blockedIoctls        = []uint32{unix.TIOCSTI, unix.TIOCLINUX}
	// xfsSpaceIoctls reserve or allocate blocks on XFS without a write:
	// _IOW('X', nr, struct xfs_flock64) for ALLOCSP (10), ALLOCSP64 (36),
	// RESVSP (40), RESVSP64 (42) and ZERO_RANGE (57).
	xfsSpaceIoctls = []uint32{0x4030580a, 0x40305824, 0x40305828, 0x4030582a, 0x40305839}
)

// cloneNewFlags are the namespace-creating flags of clone and unshare.
const cloneNewFlags = unix.CLONE_NEWNS | unix.CLONE_NEWUTS | unix.CLONE_NEWIPC | unix.CLONE_NEWUSER |
	unix.CLONE_NEWPID | unix.CLONE_NEWNET | unix.CLONE_NEWCGROUP | unix.CLONE_NEWTIME

const (
	retAllow       = unix.SECCOMP_RET_ALLOW
	retKillProcess = unix.SECCOMP_RET_KILL_PROCESS
	offNr          = 0
	offArch        = 4
	x32SyscallBit  = 0x40000000
)

func retErrno(e unix.Errno) bpf.RetConstant {
	return bpf.RetConstant{Val: unix.SECCOMP_RET_ERRNO | uint32(e)}
}

// argLow is the offset of the low 32 bits of syscall argument i in
// struct seccomp_data (little-endian architectures).
func argLow(i int) uint32 { return uint32(16 + 8*i) }

func auditArch() (uint32, error) {
	switch runtime.GOARCH {
	case "amd64":
		return unix.AUDIT_ARCH_X86_64, nil
	case "arm64":
		return unix.AUDIT_ARCH_AARCH64, nil
	}
	return 0, fmt.Errorf("no seccomp filter for %s", runtime.GOARCH)
}

// seccompProgram assembles the filter for the running architecture, with
// what o adds.
func seccompProgram(o seccompOpts) ([]bpf.RawInstruction, error) {
	arch, err := auditArch()
	if err != nil {
		return nil, err
	}
	var p []bpf.Instruction
	p = append(p,
		bpf.LoadAbsolute{Off: offArch, Size: 4},
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: arch, SkipTrue: 1},
		bpf.RetConstant{Val: retKillProcess},
		bpf.LoadAbsolute{Off: offNr, Size: 4},
	)
	if runtime.GOARCH == "amd64" {
		p = append(p,
			bpf.JumpIf{Cond: bpf.JumpGreaterOrEqual, Val: x32SyscallBit, SkipFalse: 1},
			retErrno(unix.ENOSYS),
		)
	}
	for _, nr := range blockedSyscalls {
		p = append(p, bpf.JumpIf{Cond: bpf.JumpEqual, Val: nr, SkipFalse: 1}, retErrno(unix.EPERM))
	}
	p = append(p, bpf.JumpIf{Cond: bpf.JumpEqual, Val: unix.SYS_CLONE3, SkipFalse: 1}, retErrno(unix.ENOSYS))
	p = append(p, bpf.JumpIf{Cond: bpf.JumpEqual, Val: unix.SYS_OPENAT2, SkipFalse: 1}, retErrno(unix.ENOSYS))
	ioctls := blockedIoctls
	if o.OwnerWrites {
		for _, nr := range xattrSetSyscalls {
			p = append(p, bpf.JumpIf{Cond: bpf.JumpEqual, Val: nr, SkipFalse: 1}, retErrno(unix.EOPNOTSUPP))
		}
	}
	if o.NoFallocate {
		p = append(p, bpf.JumpIf{Cond: bpf.JumpEqual, Val: unix.SYS_FALLOCATE, SkipFalse: 1}, retErrno(unix.EOPNOTSUPP))
		ioctls = append(append([]uint32(nil), blockedIoctls...), xfsSpaceIoctls...)
	}
	// Argument checks: each block ends in allow or deny, so the syscall
	// number is not needed again after it.
	p = appendArgBlock(p, unix.SYS_SOCKET, 0, blockedSocketDomains, 0)
	p = appendArgBlock(p, unix.SYS_IOCTL, 1, ioctls, 0)
	p = appendArgBlock(p, unix.SYS_CLONE, 0, nil, cloneNewFlags)
	p = appendArgBlock(p, unix.SYS_UNSHARE, 0, nil, cloneNewFlags)
	p = appendSocketpairBlock(p)
	for _, sc := range modeSyscalls {
		if sc.flagsArg < 0 {
			mask := uint32(setIDBits)
			if o.OwnerWrites && sc.chmod {
				mask |= ownerWriteBits
			}
			p = appendArgBlock(p, sc.nr, sc.modeArg, nil, mask)
		} else {
			p = appendCreateBlock(p, sc.nr, sc.flagsArg, sc.modeArg)
		}
	}
	p = append(p, bpf.RetConstant{Val: retAllow})
	return bpf.Assemble(p)
}

// appendArgBlock adds: if nr matches, deny when the low 32 bits of argument
// arg equal one of values, or share a bit with mask; else allow.
func appendArgBlock(p []bpf.Instruction, nr uint32, arg int, values []uint32, mask uint32) []bpf.Instruction {
	var block []bpf.Instruction
	block = append(block, bpf.LoadAbsolute{Off: argLow(arg), Size: 4})
	n := len(values)
	if mask != 0 {
		n = 1
	}
	// Layout: load; n tests; ret allow; ret EPERM. Test i jumps to EPERM.
	for i := 0; i < n; i++ {
		skip := uint8(n - i) // past the remaining tests and the allow
		if mask != 0 {
			block = append(block, bpf.JumpIf{Cond: bpf.JumpBitsSet, Val: mask, SkipTrue: skip})
		} else {
			block = append(block, bpf.JumpIf{Cond: bpf.JumpEqual, Val: values[i], SkipTrue: skip})
		}
	}
	block = append(block, bpf.RetConstant{Val: retAllow}, retErrno(unix.EPERM))
	p = append(p, bpf.JumpIf{Cond: bpf.JumpEqual, Val: nr, SkipFalse: uint8(len(block))})
	return append(p, block...)
}

// setIDBits are S_ISUID and S_ISGID.
const setIDBits = unix.S_ISUID | unix.S_ISGID

// createFlags are the open flags that create a file (O_TMPFILE without
// its O_DIRECTORY part, which plain directory opens set too).
const createFlags = unix.O_CREAT | (unix.O_TMPFILE &^ unix.O_DIRECTORY)

// modeSyscall is a call that sets a file mode: the mode's argument, and for
// opens the flags' (-1: the mode always applies).
type modeSyscall struct {
	nr                uint32
	flagsArg, modeArg int
	chmod             bool // of the chmod family (the mode is the whole new mode)
}

// modeSyscalls are the calls that can set S_ISUID or S_ISGID on a file, on
// every architecture; seccomp_linux_<arch>.go adds the legacy ones.
var modeSyscalls = append([]modeSyscall{
	{unix.SYS_FCHMOD, -1, 1, true}, {unix.SYS_FCHMODAT, -1, 2, true}, {unix.SYS_FCHMODAT2, -1, 2, true},
	{unix.SYS_MKNODAT, -1, 2, false}, {unix.SYS_OPENAT, 2, 3, false},
}, legacyModeSyscalls...)

// xattrSetSyscalls set or remove extended attributes (ACLs among them);
// 463 and 466 are setxattrat and removexattrat (Linux 6.13, numbered alike
// on every architecture).
var xattrSetSyscalls = []uint32{
	unix.SYS_SETXATTR, unix.SYS_LSETXATTR, unix.SYS_FSETXATTR,
	unix.SYS_REMOVEXATTR, unix.SYS_LREMOVEXATTR, unix.SYS_FREMOVEXATTR,
	463, 466,
}

// appendCreateBlock adds: if nr matches, deny when the flags argument has
// a create flag and the mode argument a set-id bit; else allow.
func appendCreateBlock(p []bpf.Instruction, nr uint32, flagsArg, modeArg int) []bpf.Instruction {
	block := []bpf.Instruction{
		bpf.LoadAbsolute{Off: argLow(flagsArg), Size: 4},
		bpf.JumpIf{Cond: bpf.JumpBitsSet, Val: createFlags, SkipFalse: 2}, // no create: allow
		bpf.LoadAbsolute{Off: argLow(modeArg), Size: 4},
		bpf.JumpIf{Cond: bpf.JumpBitsSet, Val: setIDBits, SkipTrue: 1},
		bpf.RetConstant{Val: retAllow},
		retErrno(unix.EPERM),
	}
	p = append(p, bpf.JumpIf{Cond: bpf.JumpEqual, Val: nr, SkipFalse: uint8(len(block))})
	return append(p, block...)
}

// appendSocketpairBlock adds: socketpair(AF_UNIX, SOCK_DGRAM | flags) is
// denied; other pairs are allowed.
func appendSocketpairBlock(p []bpf.Instruction) []bpf.Instruction {
	block := []bpf.Instruction{
		bpf.LoadAbsolute{Off: argLow(0), Size: 4},
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: unix.AF_UNIX, SkipFalse: 3}, // not AF_UNIX: allow
		bpf.LoadAbsolute{Off: argLow(1), Size: 4},
		bpf.ALUOpConstant{Op: bpf.ALUOpAnd, Val: 0xf}, // the type without SOCK_NONBLOCK/SOCK_CLOEXEC
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: unix.SOCK_DGRAM, SkipTrue: 1},
		bpf.RetConstant{Val: retAllow},
		retErrno(unix.EPERM),
	}
	p = append(p, bpf.JumpIf{Cond: bpf.JumpEqual, Val: unix.SYS_SOCKETPAIR, SkipFalse: uint8(len(block))})
	return append(p, block...)
}

// seccompOpts are what a run adds to the filter every sandbox gets.
type seccompOpts struct {
	// NoFallocate refuses preallocation (Spec.NoFallocate).
	NoFallocate bool
	// OwnerWrites: the run writes a tree as its owner (an idmapped
	// writable root), where a mode or an ACL it gives an entry lets other
	// local users in: chmod to a group- or other-writable mode and setting
	// extended attributes (ACLs are system.posix_acl_*) are refused. (A
	// umask cannot be held this way: shells read it with umask(0) and set
	// it back; the exec stage starts with 022, and the sweep takes such
	// bits off what a run made with a looser one.)
	OwnerWrites bool
}

// ownerWriteBits are the mode bits a run writing as a tree's owner may not
// give: group and other write.
const ownerWriteBits = 0o022

// installSeccomp sets no_new_privs and loads the filter for every thread of
// the calling process. It is called right before execve.
func installSeccomp(o seccompOpts) error {
	f, err := prepareSeccomp(o)
	if err != nil {
		return err
	}
	return f.install()
}

// seccompFilter is the assembled filter, ready to load.
type seccompFilter struct {
	filter []unix.SockFilter
}

// prepareSeccomp assembles the filter: the exec stage does it before it
// sets the command's address-space limit, after which the Go heap must not
// need to grow (a failed growth is a fatal "out of memory").
func prepareSeccomp(o seccompOpts) (*seccompFilter, error) {
	raw, err := seccompProgram(o)
	if err != nil {
		return nil, err
	}
	f := &seccompFilter{filter: make([]unix.SockFilter, len(raw))}
	for i, r := range raw {
		f.filter[i] = unix.SockFilter{Code: r.Op, Jt: r.Jt, Jf: r.Jf, K: r.K}
	}
	return f, nil
}

// install sets no_new_privs and loads the filter for every thread of the
// calling process; it does not allocate.
func (f *seccompFilter) install() error {
	prog := unix.SockFprog{Len: uint16(len(f.filter)), Filter: &f.filter[0]}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("prctl(PR_SET_NO_NEW_PRIVS): %w", err)
	}
	_, _, errno := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER,
		unix.SECCOMP_FILTER_FLAG_TSYNC, uintptr(unsafe.Pointer(&prog)))
	runtime.KeepAlive(f.filter)
	if errno != 0 {
		return fmt.Errorf("seccomp(SECCOMP_SET_MODE_FILTER): %w", errno)
	}
	return nil
}
