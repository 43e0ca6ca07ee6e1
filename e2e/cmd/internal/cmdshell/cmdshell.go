// Package cmdshell is what every e2e command does around its own work,
// written once: one exit-status convention (0 when done or asked for -h,
// 2 for a bad command line, 1 for a failed run), an error printed once as
// "<command>: <error>", a context that SIGINT and SIGTERM cancel so the
// command's teardown (namespaces, processes, beds) still runs, and a text
// logger on stderr.
package cmdshell

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
)

// usageError is a command line the command cannot run.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

// Usage marks err as a bad command line: Exit ends with status 2 for it
// (0 when it is flag.ErrHelp, since -h is a request, not a mistake).
func Usage(err error) error {
	if err == nil {
		return nil
	}
	return usageError{err}
}

// Status is the exit status Exit uses for err.
func Status(err error) int {
	var u usageError
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return 0
	case errors.As(err, &u):
		return 2
	}
	return 1
}

// Exit ends the process with Status(err), printing err first unless the
// status is 0 (flag has already printed the help).
func Exit(name string, err error) {
	code := Status(err)
	if code != 0 {
		fmt.Fprintf(os.Stderr, "%s: %v\n", name, err)
	}
	os.Exit(code)
}

// Run calls run with SignalContext's context and ends the process with
// Exit; it does not return.
func Run(name string, run func(ctx context.Context) error) {
	ctx, stop := SignalContext()
	err := run(ctx)
	stop()
	Exit(name, err)
}

// SignalContext is a context SIGINT and SIGTERM cancel; stop releases the
// signals (a second Ctrl-C then kills the process as usual).
func SignalContext() (context.Context, context.CancelFunc) {
	return signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
}

// Logger is a text logger on stderr at level.
func Logger(level slog.Leveler) *slog.Logger {
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
}

// ParseLevel reads a -log-level value (debug, info, warn, error).
func ParseLevel(s string) (slog.Level, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(s)); err != nil {
		return l, fmt.Errorf("log level %q: %w", s, err)
	}
	return l, nil
}
