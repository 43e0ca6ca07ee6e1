package daemon

import (
	"net"
	"os"
	"path/filepath"
	"testing"
)

func TestListen(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "cp.sock")
	tests := []struct {
		addr, network string
	}{
		{"127.0.0.1:0", "tcp"},
		{"unix://" + sock, "unix"},
	}
	for _, tc := range tests {
		t.Run(tc.network, func(t *testing.T) {
			l, err := listen(tc.addr)
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			if got := l.Addr().Network(); got != tc.network {
				t.Errorf("listen(%q) network = %q, want %q", tc.addr, got, tc.network)
			}
		})
	}
	if _, err := listen("unix://"); err == nil {
		t.Error("listen(unix://) with no path succeeded")
	}
}

// TestListenUnixReplacesStaleSocket: a socket file left by a killed
// process is replaced; one still served is refused.
func TestListenUnixReplacesStaleSocket(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cp.sock")
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := listenUnix(path); err == nil {
		t.Fatal("listened on a socket another listener serves")
	}
	// Closing a unix listener unlinks its file; a killed process does
	// not, so leave one behind by hand: a socket file nobody serves.
	l.(*net.UnixListener).SetUnlinkOnClose(false)
	l.Close()
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("stale socket file not left: %v", err)
	}
	l2, err := listenUnix(path)
	if err != nil {
		t.Fatalf("stale socket not replaced: %v", err)
	}
	l2.Close()
}
