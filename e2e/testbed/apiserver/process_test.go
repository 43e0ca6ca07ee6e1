package apiserver

import (
	"log/slog"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseVMRSS(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    uint64
		wantErr bool
	}{
		{"typical", "Name:\tetcd\nVmPeak:\t  999 kB\nVmRSS:\t   51234 kB\nRssAnon:\t 1 kB\n", 51234 * 1024, false},
		{"no VmRSS (zombie)", "Name:\tetcd\nState:\tZ (zombie)\n", 0, true},
		{"odd unit", "VmRSS:\t 12 MB\n", 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseVMRSS([]byte(tt.in))
			if (err != nil) != tt.wantErr {
				t.Fatalf("parseVMRSS error = %v, wantErr %v", err, tt.wantErr)
			}
			if got != tt.want {
				t.Errorf("parseVMRSS = %d, want %d", got, tt.want)
			}
		})
	}
}

func TestTailLines(t *testing.T) {
	tests := []struct {
		in   string
		n    int
		want string
	}{
		{"", 3, ""},
		{"a\nb\n", 3, "a\nb"},
		{"a\nb\nc\nd\n", 2, "c\nd"},
		{"a\nb\nc", 2, "b\nc"},
		{"a\n", 0, ""},
	}
	for _, tt := range tests {
		if diff := cmp.Diff(tt.want, tailLines(tt.in, tt.n)); diff != "" {
			t.Errorf("tailLines(%q, %d) (-want +got):\n%s", tt.in, tt.n, diff)
		}
	}
}

func discardLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }
