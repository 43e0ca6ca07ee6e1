package ctl

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	switchyardv1 "github.com/switchyard-proxy/switchyard/proto/switchyard/v1"
)

// Name is the program's name in usage and error lines.
const Name = "switchyardctl"

// Exit codes.
const (
	ExitOK = 0
	// ExitFailed: an error; for diff, the views differ.
	ExitFailed = 1
	// ExitUsage: bad flags or arguments, or an error in diff.
	ExitUsage = 2
)

// command is one subcommand.
type command struct {
	name    string
	args    string // positional arguments as usage shows them
	nargs   int
	summary string
	detail  string // --help's paragraph
	// failCode is the exit code of an error; ExitFailed when 0.
	failCode int
	// offline commands dial nothing, so they skip the connection checks.
	offline bool
	// run is the action of a command without flags of its own.
	run action
	// bind, for a command with flags of its own, registers them on fs and
	// returns its action.
	bind func(fs *flag.FlagSet) action
}

// action runs a command with its positional arguments; it returns the
// exit code when it succeeds.
type action func(ctx context.Context, s *session, args []string) (int, error)

// session is what a command works with.
type session struct {
	opts   Options
	out    io.Writer
	client switchyardv1.AdminServiceClient
}

// rpcContext bounds one RPC by --timeout.
func (s *session) rpcContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, s.opts.Timeout)
}

func (s *session) json() bool { return s.opts.Output == OutputJSON }

// query makes one AdminService call, named rpc in its error, bounded by
// --timeout, and prints the response: -o json as protojson, else with
// text. The response is returned for the commands whose exit code
// depends on it.
func query[Req any, Resp proto.Message](ctx context.Context, s *session, rpc string,
	call func(context.Context, Req, ...grpc.CallOption) (Resp, error), req Req,
	text func(io.Writer, Resp) error,
) (Resp, error) {
	ctx, cancel := s.rpcContext(ctx)
	defer cancel()
	resp, err := call(ctx, req)
	if err != nil {
		return resp, callFailed(rpc, err)
	}
	if s.json() {
		return resp, printProto(s.out, resp)
	}
	return resp, text(s.out, resp)
}

func commands() []command {
	return []command{statusCommand(), explainCommand(), viewCommand(), diffCommand(), serviceCommand(), rolloutCommand()}
}

func lookup(name string) (command, bool) {
	for _, c := range commands() {
		if c.name == name {
			return c, true
		}
	}
	return command{}, false
}

// usageError is a bad command line; Run exits ExitUsage.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error { return &usageError{fmt.Sprintf(format, args...)} }

// Run runs switchyardctl with args (without the program name), writing
// results to stdout and one error line to stderr, and returns the exit
// code.
func Run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	prefix, code, err := run(ctx, args, stdout)
	if err != nil {
		line := strings.ReplaceAll(err.Error(), "\n", "; ")
		var ue *usageError
		if errors.As(err, &ue) {
			line += fmt.Sprintf(" (see %s --help)", prefix)
		}
		fmt.Fprintf(stderr, "%s: %s\n", prefix, line)
	}
	return code
}

// run returns what names the error ("switchyardctl" or "switchyardctl
// explain"), the exit code and the error.
func run(ctx context.Context, args []string, stdout io.Writer) (string, int, error) {
	top := flag.NewFlagSet(Name, flag.ContinueOnError)
	top.SetOutput(io.Discard)
	top.Usage = func() {}
	var globals Options
	bindGlobal(top, &globals)
	if err := top.Parse(args); errors.Is(err, flag.ErrHelp) {
		return Name, ExitOK, mainUsage(stdout)
	} else if err != nil {
		return Name, ExitUsage, usagef("%v", err)
	}
	if top.NArg() == 0 {
		return Name, ExitUsage, usagef("no command")
	}
	name, rest := top.Arg(0), top.Args()[1:]
	if name == "help" {
		return help(stdout, rest)
	}
	cmd, ok := lookup(name)
	if !ok {
		return Name, ExitUsage, usagef("unknown command %q", name)
	}
	// The global flags given before the command are parsed again with the
	// command's, so its --help shows their defaults, not the values given.
	before := args[:len(args)-top.NArg()]
	prefix := Name + " " + cmd.name
	code, err := runCommand(ctx, cmd, append(slices.Clone(before), rest...), stdout)
	return prefix, code, err
}

func runCommand(ctx context.Context, cmd command, args []string, stdout io.Writer) (int, error) {
	fs, o, act := cmd.flagSet()
	pos, err := parseInterspersed(fs, args)
	switch {
	case errors.Is(err, flag.ErrHelp):
		return ExitOK, commandUsage(stdout, cmd, fs)
	case err != nil:
		return ExitUsage, usagef("%v", err)
	case len(pos) != cmd.nargs:
		return ExitUsage, usagef("want %s, got %d argument(s)", cmd.argsText(), len(pos))
	}
	if err := o.validateOutput(); err != nil {
		return ExitUsage, &usageError{err.Error()}
	}
	s := &session{opts: *o, out: stdout}
	if !cmd.offline {
		if err := o.validateConnection(); err != nil {
			return ExitUsage, &usageError{err.Error()}
		}
		conn, err := dial(o)
		if err != nil {
			return cmd.fail(), err
		}
		defer conn.Close()
		s.client = switchyardv1.NewAdminServiceClient(conn)
	}
	code, err := act(ctx, s, pos)
	var ue *usageError
	switch {
	case errors.As(err, &ue):
		return ExitUsage, err
	case err != nil:
		return cmd.fail(), err
	}
	return code, nil
}

// flagSet is the command's flag set: the global flags and its own.
func (c command) flagSet() (*flag.FlagSet, *Options, action) {
	fs := flag.NewFlagSet(Name+" "+c.name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	o := &Options{}
	bindGlobal(fs, o)
	if c.bind == nil {
		return fs, o, c.run
	}
	return fs, o, c.bind(fs)
}

func (c command) fail() int {
	if c.failCode == 0 {
		return ExitFailed
	}
	return c.failCode
}

func (c command) argsText() string {
	if c.args == "" {
		return "no arguments"
	}
	return c.args
}

// help prints the main usage or one command's.
func help(stdout io.Writer, args []string) (string, int, error) {
	switch len(args) {
	case 0:
		return Name, ExitOK, mainUsage(stdout)
	case 1:
		cmd, ok := lookup(args[0])
		if !ok {
			return Name, ExitUsage, usagef("unknown command %q", args[0])
		}
		fs, _, _ := cmd.flagSet()
		return Name, ExitOK, commandUsage(stdout, cmd, fs)
	}
	return Name, ExitUsage, usagef("help takes at most one command")
}
