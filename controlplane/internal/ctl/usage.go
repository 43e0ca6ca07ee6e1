package ctl

import (
	"flag"
	"fmt"
	"io"
	"strings"
)

const about = `switchyardctl reads the Switchyard control plane's AdminService (read-only):
the fleet's state, one node's view, what a node does with a packet, where a
service is live, the settings rollout. It is a
thin client: -o json prints each response as grpcurl would.`

const exitCodes = `Exit codes: 0 success; 1 an error (diff: the views differ); 2 a usage
error or an error in diff; 3 rollout: the rollout halted.`

// mainUsage prints what --help prints without a command.
func mainUsage(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "Usage: %s [flags] COMMAND [ARGS] [flags]\n\n%s\n\nCommands:\n", Name, about)
	t := newTable(&b)
	for _, c := range commands() {
		fmt.Fprintf(t, "  %s\t%s\n", strings.TrimSpace(c.name+" "+c.args), c.summary)
	}
	fmt.Fprintf(t, "  help [COMMAND]\tthis text, or a command's flags and arguments\n")
	if err := t.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(&b, "\nFlags (every command takes them, before or after it):\n")
	fs := flag.NewFlagSet(Name, flag.ContinueOnError)
	bindGlobal(fs, &Options{})
	fs.SetOutput(&b)
	fs.PrintDefaults()
	fmt.Fprintf(&b, "\n%s\n", exitCodes)
	_, err := io.WriteString(w, b.String())
	return err
}

// commandUsage prints a command's --help: every flag it takes, its own
// and the global ones.
func commandUsage(w io.Writer, c command, fs *flag.FlagSet) error {
	var b strings.Builder
	fmt.Fprintf(&b, "Usage: %s %s [flags]", Name, c.name)
	if c.args != "" {
		fmt.Fprintf(&b, " %s", c.args)
	}
	fmt.Fprintf(&b, "\n\n%s\n\n%s\n\nFlags:\n", c.summary, c.detail)
	fs.SetOutput(&b)
	fs.PrintDefaults()
	fmt.Fprintf(&b, "\n%s\n", exitCodes)
	_, err := io.WriteString(w, b.String())
	return err
}
