package dataplanetest

import (
	"log/slog"
	"testing"
)

// Logger returns a logger that writes every record, Debug included,
// through t, so a mode's logs show beside the test that caused them and
// only when it fails or runs with -v (tests log through t, never to
// stderr).
func Logger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelDebug}))
}
