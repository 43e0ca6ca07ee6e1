package procstat

import (
	"os"
	"testing"
	"time"
)

func TestParseStat(t *testing.T) {
	line := []byte("42 (a b) c) S 1 2 3 4 5 6 7 8 9 10 250 50 0 0 20 0 1 0 100 0 0")
	got, err := parseStat(line)
	if err != nil {
		t.Fatal(err)
	}
	if want := 3 * time.Second; got != want {
		t.Errorf("CPU %v, want %v", got, want)
	}
}

func TestParseStatus(t *testing.T) {
	got, err := parseStatus([]byte("Name:\tx\nVmHWM:\t  2048 kB\nVmRSS:\t  1024 kB\n"))
	if err != nil {
		t.Fatal(err)
	}
	if got.RSS != 1<<20 || got.Peak != 2<<20 {
		t.Errorf("got %+v", got)
	}
}

func TestSelf(t *testing.T) {
	if _, err := CPU(os.Getpid()); err != nil {
		t.Fatal(err)
	}
	m, err := Mem(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if m.RSS == 0 || m.Peak < m.RSS {
		t.Errorf("memory %+v", m)
	}
}
