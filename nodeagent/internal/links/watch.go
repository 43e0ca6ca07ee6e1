package links

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
	"k8s.io/utils/clock"
)

// Update is one link message: the interface's index and name, and
// whether it was deleted.
type Update struct {
	Index   int
	Name    string
	Deleted bool
}

// Source subscribes to link updates: it sends every existing link
// first, then each change, until ctx ends or the subscription fails (it
// then closes updates after sending the error to errs, at most once).
type Source interface {
	Subscribe(ctx context.Context, updates chan<- Update, errs chan<- error) error
}

// Watcher keeps the node's interface names.
type Watcher struct {
	src Source
	log *slog.Logger
	// OnChange, when set, is called after the set of names changed.
	onChange func()
	retry    time.Duration
	clk      clock.Clock

	mu     sync.Mutex
	byIdx  map[int]string
	synced bool
}

// Config configures a Watcher.
type Config struct {
	// Source is where updates come from; nil: the kernel, over netlink
	// in the calling process's network namespace.
	Source Source
	Logger *slog.Logger
	// OnChange is called (from Run's goroutine) after the names changed.
	OnChange func()
	// Retry is the pause before subscribing again after a failure;
	// default 1 s.
	Retry time.Duration
	// Clock times the pause; the real clock when nil.
	Clock clock.Clock
}

// New returns a Watcher; it watches nothing until Run.
func New(cfg Config) *Watcher {
	if cfg.Source == nil {
		cfg.Source = netlinkSource{}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Retry <= 0 {
		cfg.Retry = time.Second
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	return &Watcher{src: cfg.Source, log: cfg.Logger, onChange: cfg.OnChange, retry: cfg.Retry, clk: cfg.Clock, byIdx: map[int]string{}}
}

// Names returns the interface names, sorted; nil before the first
// listing arrived.
func (w *Watcher) Names() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.synced {
		return nil
	}
	out := make([]string, 0, len(w.byIdx))
	for _, n := range w.byIdx {
		out = append(out, n)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// Run watches until ctx ends; it returns nil then.
func (w *Watcher) Run(ctx context.Context) error {
	for {
		err := w.watch(ctx)
		if ctx.Err() != nil {
			return nil
		}
		w.log.Warn("link watch ended; subscribing again", "err", err, "retry", w.retry)
		select {
		case <-ctx.Done():
			return nil
		case <-w.clk.After(w.retry):
		}
	}
}

// watch runs one subscription: a fresh listing replaces what was known.
func (w *Watcher) watch(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	updates := make(chan Update, 64)
	errs := make(chan error, 1)
	if err := w.src.Subscribe(ctx, updates, errs); err != nil {
		return fmt.Errorf("subscribe to link updates: %w", err)
	}
	fresh := map[int]string{}
	listed := false
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case err := <-errs:
			return err
		case u, ok := <-updates:
			if !ok {
				return fmt.Errorf("link updates closed")
			}
			if !listed {
				// The subscription's first messages are the listing; the
				// known names are replaced once it is in (listingDone).
				if u.Index == listingDone {
					listed = true
					w.replace(fresh)
					continue
				}
				fresh[u.Index] = u.Name
				continue
			}
			w.apply(u)
		}
	}
}

// listingDone is the Index of the Update a Source sends after the
// existing links.
const listingDone = -1

func (w *Watcher) replace(m map[int]string) {
	w.mu.Lock()
	before := w.namesLocked()
	w.byIdx, w.synced = m, true
	changed := !slices.Equal(before, w.namesLocked())
	w.mu.Unlock()
	if changed {
		w.changed()
	}
}

func (w *Watcher) apply(u Update) {
	w.mu.Lock()
	old, had := w.byIdx[u.Index]
	switch {
	case u.Deleted:
		delete(w.byIdx, u.Index)
	default:
		w.byIdx[u.Index] = u.Name
	}
	changed := u.Deleted && had || !u.Deleted && (!had || old != u.Name)
	w.mu.Unlock()
	if changed {
		w.log.Debug("link", "name", u.Name, "index", u.Index, "deleted", u.Deleted)
		w.changed()
	}
}

func (w *Watcher) namesLocked() []string {
	out := make([]string, 0, len(w.byIdx))
	for _, n := range w.byIdx {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

func (w *Watcher) changed() {
	if w.onChange != nil {
		w.onChange()
	}
}

// netlinkSource is the kernel's link updates, over netlink, in the
// calling process's namespace.
type netlinkSource struct{}

func (netlinkSource) Subscribe(ctx context.Context, updates chan<- Update, errs chan<- error) error {
	ch := make(chan netlink.LinkUpdate, 256)
	done := make(chan struct{})
	// Subscribe first, then list: a link created in between is in both,
	// and the listing's later NEWLINK for it is idempotent.
	err := netlink.LinkSubscribeWithOptions(ch, done, netlink.LinkSubscribeOptions{
		ErrorCallback: func(err error) {
			select {
			case errs <- err:
			default:
			}
		},
	})
	if err != nil {
		return err
	}
	links, err := netlink.LinkList()
	if err != nil {
		close(done)
		return fmt.Errorf("list links: %w", err)
	}
	go func() {
		defer close(done)
		send := func(u Update) bool {
			select {
			case updates <- u:
				return true
			case <-ctx.Done():
				return false
			}
		}
		for _, l := range links {
			if !send(Update{Index: l.Attrs().Index, Name: l.Attrs().Name}) {
				return
			}
		}
		if !send(Update{Index: listingDone}) {
			return
		}
		for {
			select {
			case <-ctx.Done():
				return
			case lu, ok := <-ch:
				if !ok {
					select {
					case errs <- fmt.Errorf("link subscription closed"):
					default:
					}
					return
				}
				u := Update{Index: int(lu.Index), Name: lu.Attrs().Name, Deleted: lu.Header.Type == unix.RTM_DELLINK}
				if !send(u) {
					return
				}
			}
		}
	}()
	return nil
}
