package guest

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/switchyard-proxy/switchyard/e2e/testbed/echo"
)

// GuestEnv is set to "1" by the guest's /init (hack/qemu-kernel.sh).
const GuestEnv = "SWITCHYARD_QEMU_GUEST"

// shared is the topology every test of the run uses: building one costs
// seconds under TCG, so it is built once and the node is reset between
// tests (see useBed).
var shared *bed

func TestMain(m *testing.M) {
	if code, ok := echo.RunChild(); ok { // echo servers re-exec this binary
		os.Exit(code)
	}
	if os.Getenv(GuestEnv) != "1" {
		fmt.Printf("guest: these tests run only inside the QEMU guest (%s=1); "+
			"run them with go test ./e2e/dataplane/ipvs, which boots it\n", GuestEnv)
		os.Exit(0)
	}
	os.Exit(runWithBed(m))
}

// runWithBed builds the shared topology (one node, three pods with echo
// servers, the client), runs the tests and tears it down.
func runWithBed(m *testing.M) int {
	ctx := context.Background()
	log := slog.New(slog.NewTextHandler(os.Stdout, &slog.HandlerOptions{
		ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
			if len(groups) == 0 && a.Key == slog.TimeKey {
				return slog.Attr{}
			}
			return a
		},
	}))
	b, err := newBed(ctx, log, 3)
	if err != nil {
		fmt.Printf("guest: shared topology: %v\n", err)
		return 2
	}
	shared = b
	code := m.Run()
	cctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := b.topo.Close(cctx); err != nil {
		fmt.Printf("guest: teardown: %v\n", err)
		code = max(code, 1)
	}
	return code
}
