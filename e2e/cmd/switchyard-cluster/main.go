// Command switchyard-cluster runs the real-cluster test bed (e2e/cluster):
// kubelet nodes in network namespaces with their own containerd, a control
// plane (etcd, kube-apiserver, kube-controller-manager, kube-scheduler),
// CoreDNS, and Switchyard installed from deploy/ as pods.
//
//	switchyard-cluster up     bring it up and keep it until Ctrl-C (make cluster)
//	switchyard-cluster demo   up, then a guided tour: traffic, scale-down, ListNodes (make demo)
//	switchyard-cluster shell  a shell inside the running cluster's client namespace (make cluster-shell)
//	switchyard-cluster down   stop the running `up` or `demo` (make cluster-down)
//
// Everything runs inside namespaces the bed creates; nothing changes in
// this machine's network namespace or its sysctls.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/switchyard-proxy/switchyard/e2e/cluster"
	"github.com/switchyard-proxy/switchyard/e2e/cmd/internal/cmdshell"
)

// stateFile tells shell and down which cluster is running.
const stateFile = "/run/switchyard-cluster/current.json"

type state struct {
	Pid        int    `json:"pid"`
	ClientNS   string `json:"clientNS"`
	Kubeconfig string `json:"kubeconfig"`
	BinDir     string `json:"binDir"`
	Dir        string `json:"dir"`
}

func main() {
	cmdshell.Exit("switchyard-cluster", run(os.Args[1:]))
}

func usage() error {
	return errors.New("usage: switchyard-cluster up|demo|shell|down [flags]; switchyard-cluster up -help lists the flags")
}

func run(args []string) error {
	if len(args) == 0 {
		return cmdshell.Usage(usage())
	}
	cmd := args[0]
	fs := flag.NewFlagSet("switchyard-cluster "+cmd, flag.ContinueOnError)
	nodes := fs.Int("nodes", envInt("CLUSTER_NODES", 2), "number of kubelet nodes, 1..5 (default $CLUSTER_NODES or 2); zones zone-a, zone-b, zone-c round-robin")
	overlay := fs.String("overlay", cluster.OverlayBase, "Switchyard install: base (deploy/ as shipped: mTLS from the control plane's own CA), plaintext (deploy/overlays/plaintext) or mtls (deploy/overlays/mtls: cert-manager's certificates, here from a test CA); none installs no proxy")
	mode := fs.String("mode", "iptables", "the agents' dataplane mode: iptables, nftables or userspace (this kernel has no IPVS)")
	keep := fs.Bool("keep-dir", false, "keep the state directory (every component's log) after teardown")
	exit := fs.Bool("exit", false, "tear down as soon as the cluster is up (up) or the tour is over (demo)")
	if err := fs.Parse(args[1:]); err != nil {
		return cmdshell.Usage(err)
	}
	if os.Geteuid() != 0 {
		return errors.New("needs root: it creates network namespaces, mount namespaces and cgroups (never touching this machine's own network namespace or sysctls); run: sudo make " + map[string]string{"up": "cluster", "demo": "demo"}[cmd])
	}
	switch cmd {
	case "up", "demo":
		return upAndWait(cmd, cluster.Config{Nodes: *nodes, KeepDir: *keep}, *overlay, *mode, *exit)
	case "shell":
		return shell()
	case "down":
		return down()
	}
	return usage()
}

func upAndWait(cmd string, cfg cluster.Config, overlay, mode string, exit bool) error {
	log := cmdshell.Logger(slog.LevelInfo)
	cfg.Logger = log
	ctx, stop := cmdshell.SignalContext()
	defer stop()
	say("building or reusing the bed's binaries and images (cached by version and content)")
	archives, err := cluster.BuildImages(ctx, cfg)
	if err != nil {
		return err
	}
	begin := time.Now()
	c, err := cluster.Up(ctx, cluster.WithImages(cfg, archives))
	if err != nil {
		return err
	}
	defer func() {
		say("tearing down")
		if err := c.Down(context.Background()); err != nil {
			log.Error("teardown", "err", err)
		} else {
			say("torn down: no namespace, mount, cgroup or process left")
		}
		os.Remove(stateFile)
	}()
	say(fmt.Sprintf("%d kubelet nodes Ready in %v", cfg.Nodes, c.Stats().Total.Round(time.Millisecond)))
	if overlay != "none" {
		if err := install(ctx, c, overlay, mode); err != nil {
			return err
		}
		say(fmt.Sprintf("Switchyard (%s, %s mode) and CoreDNS running %v after start", overlay, mode, time.Since(begin).Round(time.Millisecond)))
	}
	if err := writeState(c); err != nil {
		return err
	}
	if cmd == "demo" {
		if err := tour(ctx, c); err != nil {
			return err
		}
	}
	if exit {
		return nil
	}
	say("cluster running; in another terminal: sudo make cluster-shell (kubectl ready); Ctrl-C tears it down")
	<-ctx.Done()
	return nil
}

func install(ctx context.Context, c *cluster.Cluster, overlay, mode string) error {
	wctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	return c.InstallWithDNS(wctx, overlay, mode)
}

func writeState(c *cluster.Cluster) error {
	b, err := json.MarshalIndent(state{Pid: os.Getpid(), ClientNS: c.ClientNS(), Kubeconfig: c.AdminKubeconfig(),
		BinDir: c.BinDir(), Dir: c.Dir()}, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(stateFile), 0o755); err != nil {
		return err
	}
	return os.WriteFile(stateFile, b, 0o600)
}

func readState() (state, error) {
	var s state
	b, err := os.ReadFile(stateFile)
	if err != nil {
		return s, fmt.Errorf("no running cluster (%w): start one with sudo make cluster", err)
	}
	return s, json.Unmarshal(b, &s)
}

// shell opens bash inside the client namespace with kubectl on PATH and
// KUBECONFIG set.
func shell() error {
	s, err := readState()
	if err != nil {
		return err
	}
	fmt.Printf("a shell in the cluster's client namespace %s (exit to leave; the cluster keeps running)\n", s.ClientNS)
	cmd := exec.Command("nsenter", "--net=/run/netns/"+s.ClientNS, "--", "bash", "--norc", "-i")
	cmd.Env = append(os.Environ(), "KUBECONFIG="+s.Kubeconfig, "PATH="+s.BinDir+":"+os.Getenv("PATH"),
		`PS1=(switchyard-cluster) \w\$ `)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	return cmd.Run()
}

// down asks the running `up` (by the PID it recorded) to tear down, and
// waits until it has.
func down() error {
	s, err := readState()
	if err != nil {
		return err
	}
	if err := syscall.Kill(s.Pid, syscall.SIGTERM); err != nil {
		return fmt.Errorf("signal switchyard-cluster (pid %d): %w", s.Pid, err)
	}
	for range 120 {
		if _, err := os.Stat("/proc/" + strconv.Itoa(s.Pid)); err != nil {
			fmt.Println("cluster down")
			return nil
		}
		time.Sleep(500 * time.Millisecond)
	}
	return fmt.Errorf("switchyard-cluster (pid %d) still running after 60 s", s.Pid)
}

func say(msg string) { fmt.Printf("== %s %s\n", time.Now().Format("15:04:05"), msg) }

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil {
		return v
	}
	return def
}
