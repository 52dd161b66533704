package runner

import (
	"encoding/binary"
	"runtime"
	"testing"

	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// seccompInput builds a seccomp_data as golang.org/x/net/bpf's VM reads it:
// the VM loads words big-endian while the kernel's seccomp_data is native
// (little-endian), so each 32-bit field is stored big-endian at the offset
// the little-endian layout gives it (an argument's low word first).
func seccompInput(arch, nr uint32, args ...uint64) []byte {
	b := make([]byte, 64)
	binary.BigEndian.PutUint32(b[0:], nr)
	binary.BigEndian.PutUint32(b[4:], arch)
	for i, a := range args {
		binary.BigEndian.PutUint32(b[16+8*i:], uint32(a))
		binary.BigEndian.PutUint32(b[20+8*i:], uint32(a>>32))
	}
	return b
}

// seccompVM is the filter, ready to run on seccompInput.
func seccompVM(t *testing.T, noFallocate bool) *bpf.VM {
	t.Helper()
	raw, err := seccompProgram(seccompOpts{NoFallocate: noFallocate})
	if err != nil {
		t.Skip(err)
	}
	insts, ok := bpf.Disassemble(raw)
	if !ok {
		t.Fatal("the program does not disassemble")
	}
	vm, err := bpf.NewVM(insts)
	if err != nil {
		t.Fatal(err)
	}
	return vm
}

// A directory workspace's sandbox refuses preallocation (fallocate with
// EOPNOTSUPP, so that glibc's posix_fallocate writes instead; XFS's
// reservation ioctls), every other sandbox allows it; the rest of the
// filter is the same.
func TestSeccompNoFallocate(t *testing.T) {
	arch, _ := auditArch()
	eopnotsupp := int(unix.SECCOMP_RET_ERRNO | uint32(unix.EOPNOTSUPP))
	eperm := int(unix.SECCOMP_RET_ERRNO | uint32(unix.EPERM))
	allow := int(unix.SECCOMP_RET_ALLOW)
	for _, tc := range []struct {
		name       string
		in         []byte
		with, wout int
	}{
		{"fallocate", seccompInput(arch, unix.SYS_FALLOCATE, 3, 0, 0, 100<<20), eopnotsupp, allow},
		{"fallocate(KEEP_SIZE)", seccompInput(arch, unix.SYS_FALLOCATE, 3, unix.FALLOC_FL_KEEP_SIZE, 0, 100<<20), eopnotsupp, allow},
		{"ioctl(XFS_IOC_RESVSP64)", seccompInput(arch, unix.SYS_IOCTL, 3, 0x4030582a), eperm, allow},
		{"ioctl(XFS_IOC_ZERO_RANGE)", seccompInput(arch, unix.SYS_IOCTL, 3, 0x40305839), eperm, allow},
		{"ioctl(TIOCSTI)", seccompInput(arch, unix.SYS_IOCTL, 0, unix.TIOCSTI), eperm, eperm},
		{"ioctl(TCGETS)", seccompInput(arch, unix.SYS_IOCTL, 0, unix.TCGETS), allow, allow},
		{"ftruncate", seccompInput(arch, unix.SYS_FTRUNCATE, 3, 1<<30), allow, allow},
		{"pwrite64", seccompInput(arch, unix.SYS_PWRITE64, 3, 0, 1, 4095), allow, allow},
		{"mount", seccompInput(arch, unix.SYS_MOUNT), eperm, eperm},
	} {
		for _, no := range []bool{true, false} {
			want := tc.wout
			if no {
				want = tc.with
			}
			if got, err := seccompVM(t, no).Run(tc.in); err != nil || got != want {
				t.Errorf("%s (noFallocate %v): got %#x (%v), want %#x", tc.name, no, got, err, want)
			}
		}
	}
}

func TestSeccompProgram(t *testing.T) {
	vm := seccompVM(t, false)
	arch, _ := auditArch()
	eperm := int(unix.SECCOMP_RET_ERRNO | uint32(unix.EPERM))
	enosys := int(unix.SECCOMP_RET_ERRNO | uint32(unix.ENOSYS))
	allow := int(unix.SECCOMP_RET_ALLOW)
	kill := int(unix.SECCOMP_RET_KILL_PROCESS)
	for _, tc := range []struct {
		name string
		in   []byte
		want int
	}{
		{"socket(AF_UNIX)", seccompInput(arch, unix.SYS_SOCKET, unix.AF_UNIX, unix.SOCK_STREAM), eperm},
		{"socket(AF_UNIX) with high bits", seccompInput(arch, unix.SYS_SOCKET, 1<<32|unix.AF_UNIX), eperm},
		{"socket(AF_VSOCK)", seccompInput(arch, unix.SYS_SOCKET, unix.AF_VSOCK), eperm},
		{"socket(AF_PACKET)", seccompInput(arch, unix.SYS_SOCKET, unix.AF_PACKET), eperm},
		{"socket(AF_INET)", seccompInput(arch, unix.SYS_SOCKET, unix.AF_INET), allow},
		{"socket(AF_INET6)", seccompInput(arch, unix.SYS_SOCKET, unix.AF_INET6), allow},
		{"socketpair(AF_UNIX, SOCK_STREAM)", seccompInput(arch, unix.SYS_SOCKETPAIR, unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC), allow},
		{"socketpair(AF_UNIX, SOCK_SEQPACKET)", seccompInput(arch, unix.SYS_SOCKETPAIR, unix.AF_UNIX, unix.SOCK_SEQPACKET), allow},
		{"socketpair(AF_UNIX, SOCK_DGRAM)", seccompInput(arch, unix.SYS_SOCKETPAIR, unix.AF_UNIX, unix.SOCK_DGRAM), eperm},
		{"socketpair(AF_UNIX, SOCK_DGRAM|SOCK_CLOEXEC|SOCK_NONBLOCK)", seccompInput(arch, unix.SYS_SOCKETPAIR, unix.AF_UNIX, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC|unix.SOCK_NONBLOCK), eperm},
		{"fchmodat(0755)", seccompInput(arch, unix.SYS_FCHMODAT, 0, 0, 0o755), allow},
		{"fchmodat(04755)", seccompInput(arch, unix.SYS_FCHMODAT, 0, 0, 0o4755), eperm},
		{"fchmodat(02755)", seccompInput(arch, unix.SYS_FCHMODAT, 0, 0, 0o2755), eperm},
		{"fchmod(04755)", seccompInput(arch, unix.SYS_FCHMOD, 0, 0o4755), eperm},
		{"fchmodat2(06755)", seccompInput(arch, unix.SYS_FCHMODAT2, 0, 0, 0o6755, 0), eperm},
		{"openat(O_CREAT, 04755)", seccompInput(arch, unix.SYS_OPENAT, 0, 0, unix.O_CREAT|unix.O_WRONLY, 0o4755), eperm},
		{"openat(O_TMPFILE, 02755)", seccompInput(arch, unix.SYS_OPENAT, 0, 0, unix.O_TMPFILE|unix.O_RDWR, 0o2755), eperm},
		{"openat(O_CREAT, 0644)", seccompInput(arch, unix.SYS_OPENAT, 0, 0, unix.O_CREAT|unix.O_WRONLY, 0o644), allow},
		{"openat(O_RDONLY, garbage mode)", seccompInput(arch, unix.SYS_OPENAT, 0, 0, unix.O_RDONLY, 0o4755), allow},
		{"openat(O_DIRECTORY)", seccompInput(arch, unix.SYS_OPENAT, 0, 0, unix.O_DIRECTORY, 0), allow},
		{"mknodat(S_IFREG|04755)", seccompInput(arch, unix.SYS_MKNODAT, 0, 0, unix.S_IFREG|0o4755, 0), eperm},
		{"openat2", seccompInput(arch, unix.SYS_OPENAT2), enosys},
		{"clone(CLONE_NEWUSER)", seccompInput(arch, unix.SYS_CLONE, unix.CLONE_NEWUSER|uint64(unix.SIGCHLD)), eperm},
		{"clone(CLONE_NEWNET)", seccompInput(arch, unix.SYS_CLONE, unix.CLONE_NEWNET), eperm},
		{"clone(thread)", seccompInput(arch, unix.SYS_CLONE, unix.CLONE_VM|unix.CLONE_FS|unix.CLONE_FILES|unix.CLONE_SIGHAND|unix.CLONE_THREAD), allow},
		{"clone3", seccompInput(arch, unix.SYS_CLONE3), enosys},
		{"unshare(CLONE_NEWNS)", seccompInput(arch, unix.SYS_UNSHARE, unix.CLONE_NEWNS), eperm},
		{"unshare(CLONE_FILES)", seccompInput(arch, unix.SYS_UNSHARE, unix.CLONE_FILES), allow},
		{"setns", seccompInput(arch, unix.SYS_SETNS), eperm},
		{"ioctl(TIOCSTI)", seccompInput(arch, unix.SYS_IOCTL, 0, unix.TIOCSTI), eperm},
		{"ioctl(TIOCSTI) with high bits", seccompInput(arch, unix.SYS_IOCTL, 0, 1<<40|unix.TIOCSTI), eperm},
		{"ioctl(TCGETS)", seccompInput(arch, unix.SYS_IOCTL, 0, unix.TCGETS), allow},
		{"mount", seccompInput(arch, unix.SYS_MOUNT), eperm},
		{"ptrace", seccompInput(arch, unix.SYS_PTRACE), eperm},
		{"process_vm_readv", seccompInput(arch, unix.SYS_PROCESS_VM_READV), eperm},
		{"bpf", seccompInput(arch, unix.SYS_BPF), eperm},
		{"keyctl", seccompInput(arch, unix.SYS_KEYCTL), eperm},
		{"io_uring_setup", seccompInput(arch, unix.SYS_IO_URING_SETUP), eperm},
		{"perf_event_open", seccompInput(arch, unix.SYS_PERF_EVENT_OPEN), eperm},
		{"userfaultfd", seccompInput(arch, unix.SYS_USERFAULTFD), eperm},
		{"openat", seccompInput(arch, unix.SYS_OPENAT), allow},
		{"read", seccompInput(arch, unix.SYS_READ), allow},
		{"execve", seccompInput(arch, unix.SYS_EXECVE), allow},
		{"foreign arch", seccompInput(unix.AUDIT_ARCH_I386, unix.SYS_READ), kill},
	} {
		got, err := vm.Run(tc.in)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if got != tc.want {
			t.Errorf("%s: got %#x, want %#x", tc.name, got, tc.want)
		}
	}
	if runtime.GOARCH == "amd64" {
		if got, _ := vm.Run(seccompInput(arch, 0x40000000|unix.SYS_READ)); got != enosys {
			t.Errorf("x32 syscall: got %#x, want ENOSYS", got)
		}
		for _, sc := range legacyModeSyscalls {
			args := make([]uint64, 4)
			args[sc.modeArg] = 0o4755
			if sc.flagsArg >= 0 {
				args[sc.flagsArg] = unix.O_CREAT
			}
			if got, _ := vm.Run(seccompInput(arch, sc.nr, args...)); got != eperm {
				t.Errorf("syscall %d with a set-id mode: got %#x, want EPERM", sc.nr, got)
			}
		}
	}
}

// A run writing a tree as its owner (an idmapped writable root) gives no
// entry to the group or others: chmod to a group- or other-writable mode,
// and setting extended attributes (ACLs) are refused; umask is not (shells
// read it with umask(0));
// every other run may.
func TestSeccompOwnerWrites(t *testing.T) {
	arch, _ := auditArch()
	eopnotsupp := int(unix.SECCOMP_RET_ERRNO | uint32(unix.EOPNOTSUPP))
	eperm := int(unix.SECCOMP_RET_ERRNO | uint32(unix.EPERM))
	allow := int(unix.SECCOMP_RET_ALLOW)
	vm := func(owner bool) *bpf.VM {
		raw, err := seccompProgram(seccompOpts{OwnerWrites: owner})
		if err != nil {
			t.Skip(err)
		}
		insts, _ := bpf.Disassemble(raw)
		v, err := bpf.NewVM(insts)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	for _, tc := range []struct {
		name         string
		in           []byte
		owner, other int
	}{
		{"fchmodat 0777", seccompInput(arch, unix.SYS_FCHMODAT, uint64(0xffffff9c), 0, 0o777), eperm, allow},
		{"fchmod 0775", seccompInput(arch, unix.SYS_FCHMOD, 3, 0o775), eperm, allow},
		{"fchmodat2 0757", seccompInput(arch, unix.SYS_FCHMODAT2, 3, 0, 0o757, 0), eperm, allow},
		{"fchmodat 0755", seccompInput(arch, unix.SYS_FCHMODAT, 3, 0, 0o755), allow, allow},
		{"fchmod 01755", seccompInput(arch, unix.SYS_FCHMOD, 3, 0o1755), allow, allow},
		{"setxattr", seccompInput(arch, unix.SYS_SETXATTR), eopnotsupp, allow},
		{"fsetxattr", seccompInput(arch, unix.SYS_FSETXATTR), eopnotsupp, allow},
		{"removexattr", seccompInput(arch, unix.SYS_LREMOVEXATTR), eopnotsupp, allow},
		{"mknodat fifo 0666", seccompInput(arch, unix.SYS_MKNODAT, 3, 0, unix.S_IFIFO|0o666), allow, allow},
		{"openat O_CREAT 0666", seccompInput(arch, unix.SYS_OPENAT, 3, 0, unix.O_CREAT, 0o666), allow, allow},
		{"fchmod 04755", seccompInput(arch, unix.SYS_FCHMOD, 3, 0o4755), eperm, eperm},
		{"umask 0", seccompInput(arch, unix.SYS_UMASK, 0), allow, allow},
	} {
		if got, err := vm(true).Run(tc.in); err != nil || got != tc.owner {
			t.Errorf("%s, writing as the owner: got %#x (%v), want %#x", tc.name, got, err, tc.owner)
		}
		if got, err := vm(false).Run(tc.in); err != nil || got != tc.other {
			t.Errorf("%s: got %#x (%v), want %#x", tc.name, got, err, tc.other)
		}
	}
}
