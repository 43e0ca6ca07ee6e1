package cmdshell

import (
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"testing"
)

func TestStatus(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want int
	}{
		{"done", nil, 0},
		{"-h", flag.ErrHelp, 0},
		{"-h reported as usage", Usage(flag.ErrHelp), 0},
		{"bad flag", Usage(errors.New("flag provided but not defined: -x")), 2},
		{"wrapped usage", fmt.Errorf("parse: %w", Usage(errors.New("bad"))), 2},
		{"run failed", errors.New("apiserver did not start"), 1},
		{"Usage(nil)", Usage(nil), 0},
	} {
		if got := Status(tc.err); got != tc.want {
			t.Errorf("%s: Status(%v) = %d, want %d", tc.name, tc.err, got, tc.want)
		}
	}
}

func TestParseLevel(t *testing.T) {
	for s, want := range map[string]slog.Level{"debug": slog.LevelDebug, "info": slog.LevelInfo, "WARN": slog.LevelWarn, "error": slog.LevelError} {
		if got, err := ParseLevel(s); err != nil || got != want {
			t.Errorf("ParseLevel(%q) = %v, %v; want %v", s, got, err, want)
		}
	}
	if _, err := ParseLevel("loud"); err == nil {
		t.Error(`ParseLevel("loud"): no error`)
	}
}
