package apiserver

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"k8s.io/client-go/kubernetes"
)

// logTailLines is how much of each log an error or a failed test shows.
const logTailLines = 40

// startAttempts bounds retries after losing a port race.
const startAttempts = 3

// errPortInUse marks a start that failed because a freshly allocated port
// was taken before the child bound it.
var errPortInUse = errors.New("port taken before bind")

// Server is a running etcd plus kube-apiserver pair.
type Server struct {
	cfg        Config
	dir        string
	creds      credentials
	caPEM      []byte
	etcd       *process
	apiserver  *process
	etcdURL    string
	url        string
	kubeconfig string
	stats      Stats
	client     kubernetes.Interface

	stopOnce sync.Once
	stopErr  error
}

// Stats are start-up measurements taken when the server became ready.
type Stats struct {
	EtcdReady      time.Duration // etcd exec to /health OK
	APIServerReady time.Duration // kube-apiserver exec to /readyz OK
	Total          time.Duration // StartContext call to ready, including key generation
	EtcdRSS        uint64        // bytes (VmRSS) when ready
	APIServerRSS   uint64        // bytes (VmRSS) when ready
}

// String formats the stats on one line for logs.
func (s Stats) String() string {
	return fmt.Sprintf("ready in %v (etcd %v, kube-apiserver %v); RSS etcd %s, kube-apiserver %s",
		s.Total.Round(time.Millisecond), s.EtcdReady.Round(time.Millisecond),
		s.APIServerReady.Round(time.Millisecond), mib(s.EtcdRSS), mib(s.APIServerRSS))
}

func mib(b uint64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }

// StartContext starts etcd and kube-apiserver and waits until both are
// ready. ctx bounds only the start-up; the processes run until Stop. On error
// nothing is left running and the state directory is gone; the error carries
// the tail of each log.
func StartContext(ctx context.Context, cfg Config) (*Server, error) {
	cfg = cfg.withDefaults()
	if cfg.BinDir == "" {
		dir, err := BinDir()
		if err != nil {
			return nil, err
		}
		cfg.BinDir = dir
	}
	if err := checkBinaries(cfg.BinDir); err != nil {
		return nil, err
	}
	sweepStale(cfg.TempDir, cfg.Logger)
	for attempt := 1; ; attempt++ {
		s, err := startOnce(ctx, cfg)
		if err == nil {
			return s, nil
		}
		if !errors.Is(err, errPortInUse) || attempt == startAttempts {
			return nil, err
		}
		cfg.Logger.Info("lost a port race, retrying with fresh ports", "attempt", attempt, "err", err)
	}
}

func startOnce(ctx context.Context, cfg Config) (_ *Server, err error) {
	begin := time.Now()
	ctx, cancel := context.WithTimeout(ctx, cfg.ReadyTimeout)
	defer cancel()

	dir, err := makeStateDir(cfg.TempDir)
	if err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, dir: dir}
	defer func() {
		if err != nil {
			err = fmt.Errorf("start test bed API server: %w%s", err, s.logTails())
			if stopErr := s.Stop(); stopErr != nil {
				err = errors.Join(err, stopErr)
			}
		}
	}()

	if s.creds, err = writeCredentials(dir); err != nil {
		return s, err
	}
	ports, err := freePorts(3)
	if err != nil {
		return s, err
	}
	if err := s.startEtcd(ctx, ports[0], ports[1]); err != nil {
		return s, err
	}
	if err := s.startAPIServer(ctx, ports[2]); err != nil {
		return s, err
	}
	s.stats.Total = time.Since(begin)
	if s.stats.EtcdRSS, err = rssBytes(s.etcd.pid()); err != nil {
		return s, err
	}
	if s.stats.APIServerRSS, err = rssBytes(s.apiserver.pid()); err != nil {
		return s, err
	}
	if err := s.writeKubeconfig(); err != nil {
		return s, err
	}
	if err := s.newClient(); err != nil {
		return s, err
	}
	cfg.Logger.Info("test bed API server ready", "url", s.url, "dir", dir,
		"etcdPid", s.etcd.pid(), "apiserverPid", s.apiserver.pid(), "stats", s.stats.String())
	return s, nil
}

func (s *Server) startEtcd(ctx context.Context, clientPort, peerPort int) error {
	s.etcdURL = "http://127.0.0.1:" + strconv.Itoa(clientPort)
	peerURL := "http://127.0.0.1:" + strconv.Itoa(peerPort)
	args := []string{
		"--name=testbed",
		"--data-dir=" + filepath.Join(s.dir, "etcd"),
		"--listen-client-urls=" + s.etcdURL,
		"--advertise-client-urls=" + s.etcdURL,
		"--listen-peer-urls=" + peerURL,
		"--initial-advertise-peer-urls=" + peerURL,
		"--initial-cluster=testbed=" + peerURL,
		"--unsafe-no-fsync",
		"--quota-backend-bytes=" + strconv.Itoa(2<<30),
		"--log-level=warn",
	}
	p, err := startProcess("etcd", filepath.Join(s.cfg.BinDir, etcdBinary), args, filepath.Join(s.dir, "etcd.log"))
	if err != nil {
		return err
	}
	s.etcd = p
	if err := waitReady(ctx, p, newEtcdProbe(s.etcdURL)); err != nil {
		return err
	}
	s.stats.EtcdReady = time.Since(p.started)
	return nil
}

func (s *Server) startAPIServer(ctx context.Context, port int) error {
	s.url = "https://127.0.0.1:" + strconv.Itoa(port)
	args := []string{
		"--etcd-servers=" + s.etcdURL,
		"--bind-address=127.0.0.1",
		"--advertise-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(port),
		"--cert-dir=" + s.creds.certDir,
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file=" + s.creds.saPubFile,
		"--service-account-signing-key-file=" + s.creds.saKeyFile,
		"--token-auth-file=" + s.creds.tokenFile,
		"--authorization-mode=" + s.cfg.AuthorizationMode,
		"--service-cluster-ip-range=" + s.cfg.ServiceCIDR,
		"--endpoint-reconciler-type=none",
		"--disable-admission-plugins=ServiceAccount",
	}
	args = append(args, s.cfg.APIServerArgs...)
	bin := filepath.Join(s.cfg.BinDir, apiserverBinary)
	p, err := startProcess("kube-apiserver", bin, args, filepath.Join(s.dir, "kube-apiserver.log"))
	if err != nil {
		return err
	}
	s.apiserver = p
	if err := waitReady(ctx, p, newAPIServerProbe(s.url, s.creds.caFile, s.creds.adminToken)); err != nil {
		return err
	}
	s.stats.APIServerReady = time.Since(p.started)
	if s.caPEM, err = os.ReadFile(s.creds.caFile); err != nil {
		return fmt.Errorf("read serving CA: %w", err)
	}
	return nil
}

// Stop stops kube-apiserver, then etcd (SIGTERM, SIGKILL after the grace
// period), waits for both to be reaped and removes the state directory. It
// is safe to call more than once and returns the first call's result.
func (s *Server) Stop() error {
	s.stopOnce.Do(func() {
		var errs []error
		for _, p := range []*process{s.apiserver, s.etcd} { // storage last
			if p == nil {
				continue
			}
			if err := p.stop(s.cfg.StopGrace); err != nil {
				errs = append(errs, err)
			}
		}
		if s.dir != "" {
			if err := os.RemoveAll(s.dir); err != nil {
				errs = append(errs, fmt.Errorf("remove state dir: %w", err))
			}
		}
		s.stopErr = errors.Join(errs...)
		s.cfg.Logger.Info("test bed API server stopped", "dir", s.dir, "err", s.stopErr)
	})
	return s.stopErr
}

// logTails formats the last lines of every log for an error or test output.
func (s *Server) logTails() string {
	var b strings.Builder
	for _, p := range []*process{s.etcd, s.apiserver} {
		if p == nil {
			continue
		}
		tail, err := tailFile(p.logPath, logTailLines)
		if err != nil {
			tail = "(unreadable: " + err.Error() + ")"
		}
		fmt.Fprintf(&b, "\n--- %s: last %d lines of %s ---\n%s", p.name, logTailLines, p.logPath, tail)
	}
	return b.String()
}

// URL is the API server's https base URL.
func (s *Server) URL() string { return s.url }

// EtcdURL is etcd's client URL (plain http on loopback).
func (s *Server) EtcdURL() string { return s.etcdURL }

// CAFile is the PEM file that verifies the API server's serving certificate.
func (s *Server) CAFile() string { return s.creds.caFile }

// AdminToken is a bearer token for a user in system:masters.
func (s *Server) AdminToken() string { return s.creds.adminToken }

// KubeconfigPath is a kubeconfig for the admin user.
func (s *Server) KubeconfigPath() string { return s.kubeconfig }

// Dir is the state directory holding data, credentials and logs.
func (s *Server) Dir() string { return s.dir }

// PIDs returns the process ids of etcd and kube-apiserver.
func (s *Server) PIDs() (etcd, apiserver int) { return s.etcd.pid(), s.apiserver.pid() }

// LogFiles returns the paths of the etcd and kube-apiserver logs.
func (s *Server) LogFiles() (etcd, apiserver string) {
	return s.etcd.logPath, s.apiserver.logPath
}

// Stats returns the measurements taken when the server became ready.
func (s *Server) Stats() Stats { return s.stats }

// RSS returns the current resident set size, in bytes, of both processes.
func (s *Server) RSS() (etcd, apiserver uint64, err error) {
	if etcd, err = rssBytes(s.etcd.pid()); err != nil {
		return 0, 0, err
	}
	if apiserver, err = rssBytes(s.apiserver.pid()); err != nil {
		return 0, 0, err
	}
	return etcd, apiserver, nil
}
