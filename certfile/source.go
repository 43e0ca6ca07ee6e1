package certfile

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"k8s.io/utils/clock"
)

// DefaultMinCheckInterval is how often a use looks at the files at most:
// a reconnect storm of thousands of agents costs the control plane one
// stat per file and second, and a file changed a second ago is seen by
// the next handshake.
const DefaultMinCheckInterval = time.Second

// Observer is told about loads, for metrics. Each tier's metrics package
// implements it.
type Observer interface {
	// Loaded reports one load of new content of file: err is nil when it
	// was taken into use, else why the previous value stays in use.
	Loaded(file string, err error)
	// Expiry reports the NotAfter of the value in use from file.
	Expiry(file string, notAfter time.Time)
}

// Options are common to KeyPair and Bundle.
type Options struct {
	// MinCheckInterval bounds how often a use looks at the files;
	// DefaultMinCheckInterval when zero.
	MinCheckInterval time.Duration
	// Clock is the real clock when nil.
	Clock clock.PassiveClock
	// Observer is optional.
	Observer Observer
	// Logger discards when nil.
	Logger *slog.Logger
}

func (o Options) withDefaults() Options {
	if o.MinCheckInterval <= 0 {
		o.MinCheckInterval = DefaultMinCheckInterval
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o
}

// parsed is what a parse function returns: the value and when it
// expires.
type parsed[T any] struct {
	val      T
	notAfter time.Time
}

// source is one value read from files: the machinery KeyPair and Bundle
// share.
type source[T any] struct {
	// paths are the files read, in the order parse gets their contents;
	// label names them in logs and metrics.
	paths []string
	label string
	what  string // "certificate" or "CA bundle", for logs
	parse func(contents [][]byte) (parsed[T], error)
	opts  Options

	mu        sync.Mutex
	cur       parsed[T]
	sum       [sha256.Size]byte // of the contents in use
	stats     []os.FileInfo     // at the last look; nil after a failed stat or read
	ioErr     string            // the last stat or read error reported, "" when none
	lastCheck time.Time
}

// load reads the files for the first time; the value must parse.
func (s *source[T]) load() error {
	s.opts = s.opts.withDefaults()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lastCheck = s.opts.Clock.Now()
	stats, err := statAll(s.paths)
	if err != nil {
		return fmt.Errorf("%s: %w", s.what, err)
	}
	contents, err := readAll(s.paths)
	if err != nil {
		return fmt.Errorf("%s: %w", s.what, err)
	}
	p, err := s.parse(contents)
	if err != nil {
		return fmt.Errorf("%s %s: %w", s.what, s.label, err)
	}
	s.take(p, sumOf(contents), stats)
	return nil
}

// current returns the value in use after a look at the files, unless the
// last look was less than MinCheckInterval ago.
func (s *source[T]) current() T {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.opts.Clock.Since(s.lastCheck) >= s.opts.MinCheckInterval {
		s.check()
	}
	return s.cur.val
}

// Check looks at the files now and reports whether new content was taken
// into use.
func (s *source[T]) Check() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.check()
}

// check looks at the files; s.mu is held.
func (s *source[T]) check() bool {
	s.lastCheck = s.opts.Clock.Now()
	stats, err := statAll(s.paths)
	if err == nil && sameStats(stats, s.stats) {
		return false
	}
	var contents [][]byte
	if err == nil {
		contents, err = readAll(s.paths)
	}
	if err != nil {
		// Looked at again next time, but reported once per distinct
		// error: a file that stays missing is not news every time.
		s.stats = nil
		if msg := err.Error(); msg != s.ioErr {
			s.ioErr = msg
			s.reject(err)
		}
		return false
	}
	s.ioErr = ""
	// A version that does not parse is not read again until the files
	// change again.
	s.stats = stats
	sum := sumOf(contents)
	if sum == s.sum {
		return false // the same bytes again (a touch, a swap to equal content)
	}
	p, err := s.parse(contents)
	if err != nil {
		s.reject(err)
		return false
	}
	s.take(p, sum, stats)
	return true
}

// take puts p into use; s.mu is held.
func (s *source[T]) take(p parsed[T], sum [sha256.Size]byte, stats []os.FileInfo) {
	s.cur, s.sum, s.stats = p, sum, stats
	s.opts.Logger.Info("loaded "+s.what, "file", s.label, "notAfter", p.notAfter.UTC().Format(time.RFC3339))
	if o := s.opts.Observer; o != nil {
		o.Loaded(s.label, nil)
		o.Expiry(s.label, p.notAfter)
	}
}

// reject reports a version that cannot be used; s.mu is held.
func (s *source[T]) reject(err error) {
	s.opts.Logger.Warn("could not reload "+s.what+"; the last good one stays in use", "file", s.label, "err", err)
	if o := s.opts.Observer; o != nil {
		o.Loaded(s.label, err)
	}
}

// NotAfter is when the value in use expires.
func (s *source[T]) NotAfter() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cur.notAfter
}

func statAll(paths []string) ([]os.FileInfo, error) {
	stats := make([]os.FileInfo, len(paths))
	for i, p := range paths {
		fi, err := os.Stat(p)
		if err != nil {
			return nil, err // *PathError: names the file
		}
		stats[i] = fi
	}
	return stats, nil
}

func readAll(paths []string) ([][]byte, error) {
	contents := make([][]byte, len(paths))
	for i, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			return nil, err
		}
		contents[i] = b
	}
	return contents, nil
}

// sameStats reports whether every file is the one seen before (device
// and inode), unchanged in size and modification time.
func sameStats(a, b []os.FileInfo) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !os.SameFile(a[i], b[i]) || a[i].Size() != b[i].Size() || !a[i].ModTime().Equal(b[i].ModTime()) {
			return false
		}
	}
	return true
}

func sumOf(contents [][]byte) [sha256.Size]byte {
	h := sha256.New()
	for _, c := range contents {
		// Length-prefixed, so that moving bytes between files changes it.
		_, _ = fmt.Fprintf(h, "%d:", len(c))
		_, _ = h.Write(c)
	}
	var sum [sha256.Size]byte
	copy(sum[:], h.Sum(nil))
	return sum
}

// errNoCertificate is a file without a PEM certificate.
var errNoCertificate = errors.New("no PEM certificate")
