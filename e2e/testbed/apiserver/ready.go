package apiserver

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"
)

// pollInterval is how often readiness is probed.
const pollInterval = 50 * time.Millisecond

// probe checks once whether a component is ready; nil means ready.
type probe interface {
	check(ctx context.Context) error
	close()
}

// waitReady polls pr until it succeeds, p exits or ctx ends.
func waitReady(ctx context.Context, p *process, pr probe) error {
	defer pr.close()
	ticker := time.NewTicker(pollInterval)
	defer ticker.Stop()
	var last error
	for {
		if done, exitErr := p.exited(); done {
			if tail, _ := tailFile(p.logPath, logTailLines); strings.Contains(tail, "address already in use") {
				return fmt.Errorf("%w: %w", errPortInUse, exitErr)
			}
			return exitErr
		}
		if last = pr.check(ctx); last == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s (pid %d) not ready: %w; last probe: %w", p.name, p.pid(), ctx.Err(), last)
		case <-p.done:
		case <-ticker.C:
		}
	}
}

// etcdProbe wants {"health":"true"} from etcd's /health.
type etcdProbe struct {
	url    string
	client *http.Client
}

func newEtcdProbe(base string) *etcdProbe {
	return &etcdProbe{url: base + "/health", client: &http.Client{Timeout: time.Second, Transport: &http.Transport{}}}
}

func (e *etcdProbe) close() { e.client.CloseIdleConnections() }

func (e *etcdProbe) check(ctx context.Context) error {
	body, err := get(ctx, e.client, e.url, "")
	if err != nil {
		return err
	}
	if !strings.Contains(body, `"health":"true"`) {
		return fmt.Errorf("etcd /health: %s", body)
	}
	return nil
}

// apiserverProbe waits for the self-signed serving certificate to appear in
// --cert-dir, then for /readyz to answer 200 over TLS verified against it.
type apiserverProbe struct {
	url, caFile, token string
	client             *http.Client
}

func newAPIServerProbe(base, caFile, token string) *apiserverProbe {
	return &apiserverProbe{url: base + "/readyz", caFile: caFile, token: token}
}

func (a *apiserverProbe) check(ctx context.Context) error {
	if a.client == nil {
		pem, err := os.ReadFile(a.caFile)
		if err != nil {
			return fmt.Errorf("serving certificate: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return errors.New("serving certificate: not (yet) valid PEM")
		}
		a.client = &http.Client{
			Timeout:   2 * time.Second,
			Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}},
		}
	}
	_, err := get(ctx, a.client, a.url, a.token)
	var verr *tls.CertificateVerificationError
	if errors.As(err, &verr) {
		// Read while kube-apiserver was still writing it: read again.
		a.close()
		a.client = nil
	}
	return err
}

func (a *apiserverProbe) close() {
	if a.client != nil {
		a.client.CloseIdleConnections()
	}
}

// get returns the body of a 200 response, or an error with status and body.
func get(ctx context.Context, c *http.Client, url, token string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := c.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("GET %s: %s: %s", url, resp.Status, strings.TrimSpace(string(body)))
	}
	return string(body), nil
}
