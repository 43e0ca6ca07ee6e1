package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/switchyard-proxy/switchyard/e2e/testbed/apiserver"
)

// kubeProxyPort is where each kube-proxy finds the API server: a forwarder
// listening inside its network namespace.
const kubeProxyPort = "127.0.0.1:16443"

// gate is the shell a kube-proxy starts under: inside a fresh network
// namespace (unshare --net), it brings lo up and waits for one line on
// stdin before exec'ing kube-proxy. The harness sends it only after
// checking that the namespace is not this machine's, so kube-proxy never
// programs the host's iptables.
const gate = `ip link set lo up && read -r _ && exec "$0" "$@"`

// kubeProxy is one upstream kube-proxy process in its own namespace.
type kubeProxy struct {
	cmd  *exec.Cmd
	done chan struct{}
	lis  net.Listener
}

func (l *apiLoad) kubeProxies(ctx context.Context, n int, bin string) error {
	if bin == "" {
		dir, err := apiserver.BinDir()
		if err != nil {
			return err
		}
		bin = filepath.Join(dir, "kube-proxy")
	}
	if _, err := os.Stat(bin); err != nil {
		return fmt.Errorf("kube-proxy binary: %w", err)
	}
	if os.Geteuid() != 0 {
		l.env.Log.Warn("kube-proxy setup skipped: needs root for network namespaces")
		return nil
	}
	var procs []*kubeProxy
	defer func() {
		for _, p := range procs {
			p.stop()
		}
	}()
	for _, node := range l.cluster.NodeNames()[:n] {
		p, err := l.startKubeProxy(ctx, bin, node)
		if err != nil {
			return err
		}
		procs = append(procs, p)
	}
	// kube-proxy syncs, then watches; wait for the first of them to show.
	ctx2, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	for {
		c, err := l.count(ctx2)
		if err != nil {
			return err
		}
		if c.watchRequests-l.baseline.watchRequests >= float64(3*n) {
			break
		}
		select {
		case <-ctx2.Done():
			return fmt.Errorf("kube-proxies' watches did not appear (see %s/kube-proxy-*.log): %w", l.env.WorkDir, ctx2.Err())
		case <-time.After(time.Second):
		}
	}
	return l.record(ctx, "kube-proxy", n, "upstream kube-proxy (iptables mode), each in its own network namespace")
}

func (l *apiLoad) startKubeProxy(ctx context.Context, bin, node string) (*kubeProxy, error) {
	kubeconfig := filepath.Join(l.env.WorkDir, "kube-proxy-"+node+".kubeconfig")
	if err := l.writeKubeconfig(kubeconfig); err != nil {
		return nil, err
	}
	logf, err := os.Create(filepath.Join(l.env.WorkDir, "kube-proxy-"+node+".log"))
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	args := []string{"--net", "--", "sh", "-c", gate, bin,
		"--kubeconfig=" + kubeconfig, "--hostname-override=" + node, "--proxy-mode=iptables",
		"--cluster-cidr=10.128.0.0/9", "--conntrack-max-per-core=0",
		"--conntrack-tcp-timeout-established=0", "--conntrack-tcp-timeout-close-wait=0", "--v=1"}
	cmd := exec.Command("unshare", args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start kube-proxy: %w", err)
	}
	p := &kubeProxy{cmd: cmd, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(p.done) }()
	if err := p.inOwnNamespace(ctx); err != nil {
		p.stop()
		return nil, err
	}
	if p.lis, err = listenIn(cmd.Process.Pid, kubeProxyPort); err != nil {
		p.stop()
		return nil, err
	}
	go forward(p.lis, hostPort(l.srv.URL()))
	if _, err := io.WriteString(stdin, "go\n"); err != nil {
		p.stop()
		return nil, fmt.Errorf("release kube-proxy: %w", err)
	}
	_ = stdin.Close()
	return p, nil
}

// inOwnNamespace waits until the child's network namespace differs from
// this process's (unshare has run), or fails.
func (p *kubeProxy) inOwnNamespace(ctx context.Context) error {
	host, err := os.Readlink("/proc/self/ns/net")
	if err != nil {
		return err
	}
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		ns, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/net", p.cmd.Process.Pid))
		if err == nil && ns != host {
			return nil
		}
		select {
		case <-p.done:
			return errors.New("unshare exited")
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
	}
	return errors.New("kube-proxy wrapper never left the host network namespace")
}

func (p *kubeProxy) stop() {
	if p.lis != nil {
		_ = p.lis.Close()
	}
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.done
	}
}

func (l *apiLoad) writeKubeconfig(path string) error {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["bench"] = &clientcmdapi.Cluster{Server: "https://" + kubeProxyPort, CertificateAuthority: l.srv.CAFile()}
	cfg.AuthInfos["bench"] = &clientcmdapi.AuthInfo{Token: l.srv.AdminToken()}
	cfg.Contexts["bench"] = &clientcmdapi.Context{Cluster: "bench", AuthInfo: "bench"}
	cfg.CurrentContext = "bench"
	return clientcmd.WriteToFile(*cfg, path)
}

// listenIn opens a TCP listener inside pid's network namespace. It runs on
// a dedicated OS thread that enters the namespace and comes back; if it
// cannot come back, the thread stays locked and dies with its goroutine.
func listenIn(pid int, addr string) (net.Listener, error) {
	type result struct {
		l   net.Listener
		err error
	}
	ch := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := unix.Open("/proc/thread-self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			ch <- result{err: fmt.Errorf("open own netns: %w", err)}
			runtime.UnlockOSThread()
			return
		}
		defer unix.Close(orig)
		target, err := unix.Open(fmt.Sprintf("/proc/%d/ns/net", pid), unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			ch <- result{err: fmt.Errorf("open netns of %d: %w", pid, err)}
			runtime.UnlockOSThread()
			return
		}
		defer unix.Close(target)
		if err := unix.Setns(target, unix.CLONE_NEWNET); err != nil {
			ch <- result{err: fmt.Errorf("enter netns of %d: %w", pid, err)}
			runtime.UnlockOSThread()
			return
		}
		l, lerr := net.Listen("tcp", addr)
		if err := unix.Setns(orig, unix.CLONE_NEWNET); err != nil {
			if l != nil {
				_ = l.Close()
			}
			ch <- result{err: fmt.Errorf("leave netns of %d: %w", pid, err)}
			return // the thread stays locked and is discarded
		}
		runtime.UnlockOSThread()
		ch <- result{l: l, err: lerr}
	}()
	r := <-ch
	return r.l, r.err
}

// forward copies every connection accepted on l to target until l closes.
func forward(l net.Listener, target string) {
	for {
		c, err := l.Accept()
		if err != nil {
			return
		}
		go func() {
			defer c.Close()
			up, err := net.DialTimeout("tcp", target, 10*time.Second)
			if err != nil {
				return
			}
			defer up.Close()
			go func() { _, _ = io.Copy(up, c); _ = up.(*net.TCPConn).CloseWrite() }()
			_, _ = io.Copy(c, up)
		}()
	}
}

func hostPort(rawURL string) string {
	u, err := url.Parse(rawURL)
	if err != nil {
		return rawURL
	}
	return u.Host
}
