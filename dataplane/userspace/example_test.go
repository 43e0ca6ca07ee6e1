package userspace_test

import (
	"fmt"
	"log/slog"

	"github.com/switchyard-proxy/switchyard/dataplane"
	"github.com/switchyard-proxy/switchyard/dataplane/userspace"
)

// ExampleNew is the agent's wiring for --mode userspace: building the
// dataplane opens nothing; the first Apply opens the listeners.
func ExampleNew() {
	log := slog.New(slog.DiscardHandler)
	var dp dataplane.Dataplane
	dp, err := userspace.New(userspace.Config{Logger: log.With("mode", "userspace")})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(dp.Mode())
	// Output: userspace
}
