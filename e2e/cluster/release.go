package cluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"

	"github.com/switchyard-proxy/switchyard/e2e/cluster/images"
	"github.com/switchyard-proxy/switchyard/e2e/testbed/apiserver"
)

// Checkout is another commit of this repository checked out beside it, as
// a detached git worktree: an older Switchyard to install on the bed (its
// deploy/ through its own overlays, its images built from its sources), so
// that upgrades and downgrades run as an operator runs them.
type Checkout struct {
	Commit string // full hash
	Dir    string // the worktree
	repo   string // the repository it was added to
}

// NotInHistoryError says a commit is not in this repository's history.
type NotInHistoryError struct {
	Commit string
	// Shallow: the clone is shallow, so the commit may exist upstream
	// (a CI checkout with --depth); otherwise it does not exist at all.
	Shallow bool
}

func (e *NotInHistoryError) Error() string {
	if e.Shallow {
		return fmt.Sprintf("commit %s is not in this shallow clone's history (git fetch --unshallow)", e.Commit)
	}
	return fmt.Sprintf("commit %s is not in this repository", e.Commit)
}

// IsShallowHistory reports whether err says a commit is missing because
// the clone is shallow.
func IsShallowHistory(err error) bool {
	var nh *NotInHistoryError
	return errors.As(err, &nh) && nh.Shallow
}

// AddCheckout checks commit (a hash; a tag would tie the caller to tags
// being fetched) out into a new directory under parent with git worktree
// add --detach. Remove it with Remove.
func AddCheckout(ctx context.Context, commit, parent string) (*Checkout, error) {
	repo, err := apiserver.RepoRoot()
	if err != nil {
		return nil, err
	}
	full, err := git(ctx, repo, "rev-parse", "--verify", "--quiet", commit+"^{commit}")
	if err != nil {
		shallow, serr := git(ctx, repo, "rev-parse", "--is-shallow-repository")
		if serr != nil {
			return nil, fmt.Errorf("checkout %s: %w", commit, errors.Join(err, serr))
		}
		return nil, &NotInHistoryError{Commit: commit, Shallow: shallow == "true"}
	}
	dir, err := os.MkdirTemp(parent, "switchyard-"+full[:12]+"-")
	if err != nil {
		return nil, fmt.Errorf("checkout %s: %w", commit, err)
	}
	// Forget the worktrees whose directories are gone (a killed run's,
	// its temporary directory removed since), so they do not accumulate.
	if _, err := git(ctx, repo, "worktree", "prune"); err != nil {
		return nil, fmt.Errorf("checkout %s: %w", commit, err)
	}
	if _, err := git(ctx, repo, "worktree", "add", "--detach", dir, full); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("checkout %s: %w", commit, err)
	}
	return &Checkout{Commit: full, Dir: dir, repo: repo}, nil
}

// Remove removes the worktree and its directory.
func (co *Checkout) Remove(ctx context.Context) error {
	if _, err := git(ctx, co.repo, "worktree", "remove", "--force", co.Dir); err != nil {
		return fmt.Errorf("remove checkout %s: %w", co.Commit, err)
	}
	return nil
}

// Source is the checkout installed with images of tag.
func (co *Checkout) Source(tag string) Source { return Source{Root: co.Dir, Tag: tag} }

// BuildImages builds (or takes from the cache) the checkout's control
// plane and agent images with tag, for Config.Images. The rest of the bed
// (pause, CoreDNS, agnhost, the agent's Debian rootfs) is this checkout's.
func (co *Checkout) BuildImages(ctx context.Context, cfg Config, tag string) ([]images.Archive, error) {
	binDir := cfg.BinDir
	if binDir == "" {
		var err error
		if binDir, err = apiserver.BinDir(); err != nil {
			return nil, err
		}
	}
	a, err := images.Build(ctx, images.Options{RepoRoot: co.Dir, BinDir: binDir, Tag: tag,
		Only: []string{images.ControlPlane, images.Agent}, Logger: cfg.Logger})
	if err != nil {
		return nil, fmt.Errorf("images of %s: %w", co.Commit[:12], err)
	}
	return a, nil
}

// git runs git in dir and returns its trimmed standard output.
func git(ctx context.Context, dir string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "git", args...)
	cmd.Dir = dir
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("git %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return strings.TrimSpace(string(out)), nil
}
