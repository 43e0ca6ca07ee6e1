package ctl

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"
)

// DefaultServer is where the control plane listens by default
// (switchyard-controlplane --listen :18000).
const DefaultServer = "localhost:18000"

// Output formats of -o.
const (
	OutputTable = "table"
	OutputJSON  = "json"
)

// Options are the global flags every command takes.
type Options struct {
	// Server is host:port, [v6]:port or unix:///path.
	Server string
	// Insecure dials plaintext; excludes the TLS files, as the agent's.
	Insecure bool
	// CAFile verifies the control plane; CertFile and KeyFile are a client
	// certificate (an operator's, O=switchyard:admins).
	CAFile, CertFile, KeyFile string
	// ServerName overrides the name the server certificate must carry;
	// empty means the host of Server ("localhost" for a unix socket).
	ServerName string
	// Token, or TokenFile's content, is sent as "authorization: Bearer".
	Token, TokenFile string
	// Output is OutputTable or OutputJSON.
	Output string
	// Timeout bounds every RPC.
	Timeout time.Duration
}

// bindGlobal registers the global flags on fs into o, with their defaults.
func bindGlobal(fs *flag.FlagSet, o *Options) {
	fs.StringVar(&o.Server, "server", DefaultServer, "control plane gRPC address: host:port, [v6]:port or unix:///path")
	fs.BoolVar(&o.Insecure, "insecure", false, "talk plaintext gRPC to the control plane; only when no TLS file is given (labs, the plaintext overlay)")
	fs.StringVar(&o.CAFile, "ca-file", "", "PEM CA bundle that verifies the control plane's certificate (required unless --insecure; deploy/: ConfigMap switchyard-ca-bundle, ca.crt)")
	fs.StringVar(&o.CertFile, "cert-file", "", "PEM client certificate (mTLS): an operator's, with O=switchyard:admins (the control plane's --admin-group)")
	fs.StringVar(&o.KeyFile, "key-file", "", "PEM private key of --cert-file")
	fs.StringVar(&o.ServerName, "server-name", "", "name the control plane's certificate must carry, when not the host of --server (e.g. dialling a node address of a certificate issued for a DNS name)")
	fs.StringVar(&o.Token, "token", "", "Kubernetes bearer token sent as \"authorization: Bearer …\" (TLS only; the user needs ClusterRole switchyard-admin); visible in the process list: prefer --token-file")
	fs.StringVar(&o.TokenFile, "token-file", "", "file holding the bearer token (e.g. kubectl create token … > file); excludes --token")
	fs.StringVar(&o.Output, "o", OutputTable, "output format: table or json (the response as protojson, as grpcurl prints it)")
	fs.StringVar(&o.Output, "output", OutputTable, "the same as -o")
	fs.DurationVar(&o.Timeout, "timeout", 10*time.Second, "deadline of each RPC")
}

// validateOutput checks -o; every command prints, so every command checks it.
func (o *Options) validateOutput() error {
	switch o.Output {
	case OutputTable, OutputJSON:
		return nil
	}
	return fmt.Errorf("-o %q: want table or json", o.Output)
}

// validateConnection checks the flags that matter to dialling, with the
// agent's rules for the TLS files.
func (o *Options) validateConnection() error {
	var errs []error
	if o.Server == "" {
		errs = append(errs, errors.New("--server is required"))
	}
	tlsFiles := o.CAFile != "" || o.CertFile != "" || o.KeyFile != ""
	switch {
	case o.Insecure && (tlsFiles || o.ServerName != ""):
		errs = append(errs, errors.New("--insecure cannot be combined with --ca-file, --cert-file, --key-file or --server-name"))
	case !o.Insecure && o.CAFile == "":
		errs = append(errs, errors.New("--ca-file is required (plaintext only with --insecure)"))
	case (o.CertFile == "") != (o.KeyFile == ""):
		errs = append(errs, errors.New("--cert-file and --key-file go together"))
	}
	switch {
	case o.Token != "" && o.TokenFile != "":
		errs = append(errs, errors.New("--token and --token-file exclude each other"))
	case o.Insecure && (o.Token != "" || o.TokenFile != ""):
		errs = append(errs, errors.New("a bearer token needs TLS: the control plane ignores it in plaintext, and it must not cross the network unencrypted"))
	}
	if o.Timeout <= 0 {
		errs = append(errs, fmt.Errorf("--timeout %v: must be positive", o.Timeout))
	}
	return errors.Join(errs...)
}

// bearerToken is --token or the trimmed content of --token-file.
func (o *Options) bearerToken() (string, error) {
	if o.TokenFile == "" {
		return o.Token, nil
	}
	b, err := os.ReadFile(o.TokenFile)
	if err != nil {
		return "", fmt.Errorf("--token-file: %w", err)
	}
	tok := strings.TrimSpace(string(b))
	if tok == "" {
		return "", fmt.Errorf("--token-file %s: empty", o.TokenFile)
	}
	return tok, nil
}

// parseInterspersed parses fs over args allowing flags after positional
// arguments ("explain node-a tcp … --desired"), which the flag package
// alone stops at; everything after "--" is positional.
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if consumed := len(args) - len(rest); consumed > 0 && args[consumed-1] == "--" {
			return append(pos, rest...), nil
		}
		if len(rest) == 0 {
			return pos, nil
		}
		pos, args = append(pos, rest[0]), rest[1:]
	}
}
