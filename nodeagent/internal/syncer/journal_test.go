package syncer

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"testing"

	"github.com/switchyard-proxy/switchyard/dataplane"
	"github.com/switchyard-proxy/switchyard/nodeagent/internal/view"
	switchyardv1 "github.com/switchyard-proxy/switchyard/proto/switchyard/v1"
)

// journal logs its calls into the harness's call log.
type journal struct {
	h         *harness
	intendErr error
}

func (j *journal) Intend(u *view.Update) error {
	j.h.record(fmt.Sprintf("intend %s %v", u.SystemVersion, slices.Sorted(maps.Keys(u.Resources))))
	return j.intendErr
}

func (j *journal) Save(v *view.View, _ map[string]struct{}) error {
	j.h.record("save " + v.SystemVersion)
	return nil
}

func (h *harness) record(s string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.log = append(h.log, s)
}

// TestJournalAroundCommit: every batch is recorded before its commit and
// saved after it, so a crash in between restores the batch too; a failed
// commit is not saved (its record stays), and a record that cannot be
// written does not stop the commit.
func TestJournalAroundCommit(t *testing.T) {
	const apply = "DATAPLANE_MODE_DRY_RUN apply full=true"
	tests := []struct {
		name      string
		intendErr error
		applyErr  error
		want      []string
	}{
		{"committed", nil, nil, []string{"intend s1 [ns/a]", apply, "save s1"}},
		{"commit failed", nil, errors.New("boom"), []string{"intend s1 [ns/a]"}},
		{"record failed", errors.New("disk full"), nil, []string{"intend s1 [ns/a]", apply, "save s1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, nil, false, func(h *harness, c *Config) {
				c.Journal = &journal{h: h, intendErr: tt.intendErr}
				if tt.applyErr == nil {
					return
				}
				build := c.NewDataplane
				c.NewDataplane = func(m switchyardv1.DataplaneMode) (dataplane.Dataplane, error) {
					dp, err := build(m)
					h.dp(m).SetHook(func(string, *dataplane.State, dataplane.ApplyOptions) error { return tt.applyErr })
					return dp, err
				}
			})
			_, err := h.s.Apply(t.Context(), update("s1", svc("ns/a", "1")))
			if (err != nil) != (tt.applyErr != nil) {
				t.Fatalf("Apply = %v, want error %v", err, tt.applyErr)
			}
			h.wantCalls(t, tt.want)
		})
	}
}
