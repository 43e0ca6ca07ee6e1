package iptables

import "github.com/switchyard-proxy/switchyard/dataplane/command"

// Runner, ExecRunner and RunError are the shared command seam; the names
// stay here for the callers that know this package.
type (
	Runner     = command.Runner
	ExecRunner = command.ExecRunner
	RunError   = command.RunError
)

// IsNotFound reports whether err says the binary does not exist.
func IsNotFound(err error) bool { return command.IsNotFound(err) }
