package daemon

import (
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
