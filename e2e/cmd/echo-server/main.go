// Command echo-server runs one test-bed echo server (see package
// testbed/echo). Tests usually re-exec their own binary instead; this binary
// is for Launcher.Binary, benchmark harnesses and humans:
//
//	ip netns exec sy-abc123-pod0 echo-server -name=pod-0 -tcp=:8080 -udp=:8080
package main

import (
	"context"
	"os"

	"github.com/switchyard-proxy/switchyard/e2e/testbed/echo"
)

func main() {
	cfg, err := echo.ParseArgs(os.Args[1:], os.Stderr)
	if err != nil {
		os.Stderr.WriteString(err.Error() + "\n")
		os.Exit(2)
	}
	os.Exit(echo.Main(context.Background(), cfg, os.Stdout, os.Stderr))
}
