package iptablestest

import (
	"context"
	"errors"
	"slices"
)

// Discard is an command.Runner whose kernel accepts every restore and
// keeps nothing: saves print empty tables and ipset knows no set. A
// benchmark over it counts only the Dataplane's own work (render, plan,
// the restore input), not a fake kernel's, which clones whole tables at
// every restore.
type Discard struct{}

// errNoSet is ipset's answer for a set it does not hold.
var errNoSet = errors.New("ipset v7.17: The set with the given name does not exist")

// Run implements command.Runner.
func (Discard) Run(_ context.Context, argv []string, _ []byte) ([]byte, error) {
	if len(argv) >= 2 && argv[0] == "ipset" && slices.Contains([]string{"save", "list"}, argv[1]) && len(argv) > 2 {
		return nil, errNoSet
	}
	return nil, nil
}
