package echo

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"
)

// Mode selects what a server does after sending its name.
type Mode string

const (
	// ModeName answers with the name only (TCP: then closes).
	ModeName Mode = "name"
	// ModeEcho answers with the name, then echoes the payload.
	ModeEcho Mode = "echo"
)

// Config describes one echo server.
type Config struct {
	// Name is sent in every reply (the pod name). No whitespace.
	Name string `json:"name"`
	// TCP and UDP are listen addresses such as ":8080"; empty disables one.
	TCP string `json:"tcp,omitempty"`
	UDP string `json:"udp,omitempty"`
	// Mode defaults to ModeName.
	Mode Mode `json:"mode,omitempty"`
	// ReportClient appends the client address as the server saw it, so tests
	// can check source NAT.
	ReportClient bool `json:"reportClient,omitempty"`
	// IdleTimeout closes a TCP conversation that sent nothing for that
	// long (default DefaultIdleTimeout): a long-lived connection that
	// keeps talking is never cut, however long a test runs.
	IdleTimeout time.Duration `json:"idleTimeout,omitempty"`
}

// DefaultIdleTimeout is Config.IdleTimeout's default.
const DefaultIdleTimeout = 30 * time.Second

func (c Config) withDefaults() Config {
	if c.Mode == "" {
		c.Mode = ModeName
	}
	if c.IdleTimeout <= 0 {
		c.IdleTimeout = DefaultIdleTimeout
	}
	return c
}

// Validate checks a config after defaults.
func (c Config) Validate() error {
	c = c.withDefaults()
	switch {
	case c.Name == "" || strings.ContainsAny(c.Name, " \t\r\n"):
		return fmt.Errorf("echo: name %q must be non-empty without whitespace", c.Name)
	case c.TCP == "" && c.UDP == "":
		return errors.New("echo: neither a TCP nor a UDP address")
	case c.Mode != ModeName && c.Mode != ModeEcho:
		return fmt.Errorf("echo: unknown mode %q", c.Mode)
	}
	return nil
}

// Args renders c as command-line flags for cmd/echo-server.
func (c Config) Args() []string {
	c = c.withDefaults()
	return []string{
		"-name=" + c.Name, "-tcp=" + c.TCP, "-udp=" + c.UDP, "-mode=" + string(c.Mode),
		fmt.Sprintf("-report-client=%t", c.ReportClient), "-idle-timeout=" + c.IdleTimeout.String(),
	}
}

// ParseArgs parses flags as rendered by Args.
func ParseArgs(args []string, output io.Writer) (Config, error) {
	fs := flag.NewFlagSet("echo-server", flag.ContinueOnError)
	fs.SetOutput(output)
	var c Config
	var mode string
	fs.StringVar(&c.Name, "name", "", "name sent in every reply (required)")
	fs.StringVar(&c.TCP, "tcp", "", "TCP listen address, e.g. :8080")
	fs.StringVar(&c.UDP, "udp", "", "UDP listen address, e.g. :8080")
	fs.StringVar(&mode, "mode", string(ModeName), "name | echo")
	fs.BoolVar(&c.ReportClient, "report-client", false, "append the client address to replies")
	fs.DurationVar(&c.IdleTimeout, "idle-timeout", DefaultIdleTimeout, "close a TCP conversation silent for this long")
	if err := fs.Parse(args); err != nil {
		return Config{}, err
	}
	if fs.NArg() > 0 {
		return Config{}, fmt.Errorf("echo: unexpected arguments %q", fs.Args())
	}
	c.Mode = Mode(mode)
	return c, c.Validate()
}

// Reply renders the first line of an answer (without the newline).
func Reply(name, client string) string {
	if client == "" {
		return name
	}
	return name + " " + client
}

// ParseReply extracts the backend name and, when reported, the client
// address from an answer's first line.
func ParseReply(b []byte) (name, client string, err error) {
	line, _, _ := strings.Cut(string(b), "\n")
	fields := strings.Fields(line)
	switch len(fields) {
	case 1:
		return fields[0], "", nil
	case 2:
		return fields[0], fields[1], nil
	}
	return "", "", fmt.Errorf("echo: malformed reply %q", line)
}
