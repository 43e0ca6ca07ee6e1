package launch

import (
	"os"
	"testing"
)

func TestParseMemory(t *testing.T) {
	got, err := parseMemory([]byte("Name:\tx\nVmHWM:\t   2048 kB\nVmRSS:\t    1024 kB\n"))
	if err != nil {
		t.Fatal(err)
	}
	if want := (Memory{RSS: 1 << 20, Peak: 2 << 20}); got != want {
		t.Errorf("parseMemory = %+v, want %+v", got, want)
	}
	for _, bad := range []string{"Name:\tx\n", "VmRSS:\t1024 kB\n", "VmHWM:\t2 MB\nVmRSS:\t1024 kB\n"} {
		if _, err := parseMemory([]byte(bad)); err == nil {
			t.Errorf("parseMemory(%q): no error", bad)
		}
	}
}

func TestReadMemorySelf(t *testing.T) {
	m, err := ReadMemory(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	rss, err := RSS(os.Getpid())
	if err != nil || m.RSS == 0 || m.Peak < m.RSS || rss == 0 {
		t.Errorf("ReadMemory = %+v, RSS = %d, %v", m, rss, err)
	}
}
