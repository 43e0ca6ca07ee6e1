package xtinfo

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Socket options of linux/netfilter_ipv4/ip_tables.h and
// linux/netfilter_ipv6/ip6_tables.h (IPT_BASE_CTL, IP6T_BASE_CTL).
const (
	iptSOGetInfo  = 64
	ip6tSOGetInfo = 64
	tableNameLen  = 32 // XT_TABLE_MAXNAMELEN
	numHooks      = 5  // NF_INET_NUMHOOKS
	// infoSize is sizeof(struct ipt_getinfo): the name, valid_hooks,
	// hook_entry[5], underflow[5], num_entries, size.
	infoSize = tableNameLen + 4 + 4*numHooks + 4*numHooks + 4 + 4
)

// Info is a table's struct ipt_getinfo.
type Info struct {
	ValidHooks uint32
	HookEntry  [numHooks]uint32
	Underflow  [numHooks]uint32
	Entries    uint32
	Size       uint32
}

// request is the getsockopt buffer asking for table: its name, the rest
// zero.
func request(table string) ([]byte, error) {
	if table == "" || len(table) >= tableNameLen {
		return nil, fmt.Errorf("xtinfo: bad table name %q", table)
	}
	b := make([]byte, infoSize)
	copy(b, table)
	return b, nil
}

// parse decodes the kernel's reply (native byte order).
func parse(b []byte) (Info, error) {
	var in Info
	if len(b) != infoSize {
		return in, fmt.Errorf("xtinfo: reply of %d bytes, want %d", len(b), infoSize)
	}
	u := func(i int) uint32 { return binary.NativeEndian.Uint32(b[tableNameLen+4*i:]) }
	in.ValidHooks = u(0)
	for h := range numHooks {
		in.HookEntry[h] = u(1 + h)
		in.Underflow[h] = u(1 + numHooks + h)
	}
	in.Entries, in.Size = u(1+2*numHooks), u(2+2*numHooks)
	return in, nil
}

// Get asks the kernel, over fd (a raw socket of the table's family:
// AF_INET for iptables, AF_INET6 for ip6tables), for the info of table.
func Get(fd int, ipv6 bool, table string) (Info, error) {
	b, err := request(table)
	if err != nil {
		return Info{}, err
	}
	level, opt := unix.IPPROTO_IP, iptSOGetInfo
	if ipv6 {
		level, opt = unix.IPPROTO_IPV6, ip6tSOGetInfo
	}
	n := uint32(len(b))
	_, _, errno := unix.Syscall6(unix.SYS_GETSOCKOPT, uintptr(fd), uintptr(level), uintptr(opt),
		uintptr(unsafe.Pointer(&b[0])), uintptr(unsafe.Pointer(&n)), 0)
	if errno != 0 {
		return Info{}, fmt.Errorf("xtinfo: getsockopt %s: %w", table, errno)
	}
	return parse(b[:n])
}

// Dialer opens a raw socket of the family (unix.AF_INET or AF_INET6) in
// the namespace to read.
type Dialer func(family int) (int, error)

// DialOwnNamespace opens the socket in the calling thread's namespace.
func DialOwnNamespace(family int) (int, error) {
	fd, err := unix.Socket(family, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.IPPROTO_RAW)
	if err != nil {
		return -1, fmt.Errorf("xtinfo: raw socket: %w", err)
	}
	return fd, nil
}

// Reader reads table info over one lasting socket per family, dialed at
// first use and again after a failure. It is safe for concurrent use.
type Reader struct {
	dial Dialer

	mu  sync.Mutex
	fds map[bool]int // by ipv6
}

// NewReader returns a Reader over sockets from dial.
func NewReader(dial Dialer) *Reader { return &Reader{dial: dial, fds: map[bool]int{}} }

// Info returns the info of an iptables (ipv6: ip6tables) table.
func (r *Reader) Info(ctx context.Context, ipv6 bool, table string) (Info, error) {
	if err := ctx.Err(); err != nil {
		return Info{}, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	fd, ok := r.fds[ipv6]
	if !ok {
		fam := unix.AF_INET
		if ipv6 {
			fam = unix.AF_INET6
		}
		var err error
		if fd, err = r.dial(fam); err != nil {
			return Info{}, err
		}
		r.fds[ipv6] = fd
	}
	in, err := Get(fd, ipv6, table)
	if err != nil && !errors.Is(err, unix.ENOENT) {
		_ = unix.Close(fd)
		delete(r.fds, ipv6)
	}
	return in, err
}

// Close closes the sockets; the next Info redials.
func (r *Reader) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	var errs []error
	for k, fd := range r.fds {
		errs = append(errs, unix.Close(fd))
		delete(r.fds, k)
	}
	return errors.Join(errs...)
}
