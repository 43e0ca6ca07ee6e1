package certfile_test

import (
	"crypto/x509"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/switchyard-proxy/switchyard/certfile"
	"github.com/switchyard-proxy/switchyard/certfile/certfiletest"
)

// load is one report to an Observer: "ok" or the error's text.
type load struct {
	File   string
	Result string
}

// recorder is an Observer that keeps what it was told.
type recorder struct {
	mu     sync.Mutex
	loads  []load
	expiry map[string]time.Time
}

func (r *recorder) Loaded(file string, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	res := "ok"
	if err != nil {
		res = err.Error()
	}
	r.loads = append(r.loads, load{file, res})
}

func (r *recorder) Expiry(file string, notAfter time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.expiry == nil {
		r.expiry = map[string]time.Time{}
	}
	r.expiry[file] = notAfter
}

// take returns the loads reported since the last call.
func (r *recorder) take() []load {
	r.mu.Lock()
	defer r.mu.Unlock()
	l := r.loads
	r.loads = nil
	return l
}

// results keeps the first words of each result, enough to tell errors apart.
func results(ls []load, words int) []string {
	var out []string
	for _, l := range ls {
		f := strings.Fields(l.Result)
		out = append(out, strings.Join(f[:min(words, len(f))], " "))
	}
	return out
}

// testLogger logs through t.
func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type tWriter struct{ t *testing.T }

func (w tWriter) Write(p []byte) (int, error) {
	w.t.Helper()
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

// pairFiles are the files of one layout and how to write a key pair
// into them.
type pairFiles struct {
	cert, key string
	write     func(t *testing.T, c certfiletest.Issued)
	// writeParts writes a certificate and a key that need not match.
	writeParts func(t *testing.T, certPEM, keyPEM []byte)
}

// kubeletLayout is kubelet-client-current.pem: one file holding the
// certificate and the key, a symlink swapped at rotation.
func kubeletLayout(t *testing.T) pairFiles {
	p := filepath.Join(t.TempDir(), "kubelet-client-current.pem")
	parts := func(t *testing.T, certPEM, keyPEM []byte) {
		certfiletest.RotateLink(t, p, append(append([]byte(nil), certPEM...), keyPEM...))
	}
	return pairFiles{cert: p, key: p, writeParts: parts,
		write: func(t *testing.T, c certfiletest.Issued) { parts(t, c.CertPEM, c.KeyPEM) }}
}

// volumeLayout is a Secret volume: tls.crt and tls.key through ..data.
func volumeLayout(t *testing.T) pairFiles {
	dir := t.TempDir()
	parts := func(t *testing.T, certPEM, keyPEM []byte) {
		certfiletest.WriteVolume(t, dir, map[string][]byte{"tls.crt": certPEM, "tls.key": keyPEM})
	}
	return pairFiles{cert: filepath.Join(dir, "tls.crt"), key: filepath.Join(dir, "tls.key"), writeParts: parts,
		write: func(t *testing.T, c certfiletest.Issued) { parts(t, c.CertPEM, c.KeyPEM) }}
}

// TestKeyPairReload replaces the files of a loaded key pair in the ways
// they change on a node, and checks what is in use, what Check says and
// what the Observer hears after each step.
func TestKeyPairReload(t *testing.T) {
	ca := certfiletest.NewCA(t, "test CA")
	leaf := certfiletest.Leaf{CN: "system:node:node-a", DNS: []string{"node-a"}, Usage: x509.ExtKeyUsageClientAuth}

	type env struct {
		f        pairFiles
		old, new certfiletest.Issued
	}
	type step struct {
		do          func(t *testing.T, e env)
		wantChanged bool
		wantNew     bool     // the new certificate is in use, else the old
		wantLoads   []string // results reported, first word of errors
	}
	rotate := func(t *testing.T, e env) { e.f.write(t, e.new) }
	for _, tc := range []struct {
		name   string
		layout func(t *testing.T) pairFiles
		steps  []step
	}{
		{"kubelet rotation: symlink to a new file", kubeletLayout, []step{
			{do: rotate, wantChanged: true, wantNew: true, wantLoads: []string{"ok"}},
			{do: func(*testing.T, env) {}, wantNew: true},
		}},
		{"Secret volume: ..data swapped", volumeLayout, []step{
			{do: rotate, wantChanged: true, wantNew: true, wantLoads: []string{"ok"}},
		}},
		{"the same bytes again are no reload", volumeLayout, []step{
			{do: func(t *testing.T, e env) { e.f.write(t, e.old) }},
		}},
		{"partial write keeps the last good, once reported", kubeletLayout, []step{
			{do: func(t *testing.T, e env) {
				b := e.new.Combined()
				certfiletest.WriteInPlace(t, e.f.cert, b[:len(b)-40])
			}, wantLoads: []string{"bytes"}},
			{do: func(*testing.T, env) {}}, // looked at again: not news
			{do: func(t *testing.T, e env) { certfiletest.WriteInPlace(t, e.f.cert, e.new.Combined()) },
				wantChanged: true, wantNew: true, wantLoads: []string{"ok"}},
		}},
		{"a chain cut short in its last block", volumeLayout, []step{
			{do: func(t *testing.T, e env) {
				chain := append(append([]byte(nil), e.new.CertPEM...), ca.PEM()[:100]...)
				e.f.writeParts(t, chain, e.new.KeyPEM)
			}, wantLoads: []string{"bytes"}},
		}},
		{"garbage keeps the last good", volumeLayout, []step{
			{do: func(t *testing.T, e env) { e.f.writeParts(t, []byte("garbage\n"), []byte("more garbage\n")) },
				wantLoads: []string{"bytes"}},
		}},
		{"a key of another certificate keeps the last good", volumeLayout, []step{
			{do: func(t *testing.T, e env) { e.f.writeParts(t, e.new.CertPEM, e.old.KeyPEM) },
				wantLoads: []string{"key"}},
			{do: rotate, wantChanged: true, wantNew: true, wantLoads: []string{"ok"}},
		}},
		{"a missing file is reported once, its return with the same bytes is no reload", kubeletLayout, []step{
			{do: func(t *testing.T, e env) {
				if err := os.Remove(e.f.cert); err != nil {
					t.Fatal(err)
				}
			}, wantLoads: []string{"stat"}},
			{do: func(*testing.T, env) {}},
			{do: func(t *testing.T, e env) { e.f.write(t, e.old) }},
			{do: rotate, wantChanged: true, wantNew: true, wantLoads: []string{"ok"}},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := env{f: tc.layout(t), old: ca.Issue(t, leaf), new: ca.Issue(t, leaf)}
			e.f.write(t, e.old)
			rec := &recorder{}
			kp, err := certfile.NewKeyPair(e.f.cert, e.f.key, certfile.Options{Observer: rec, Logger: testLogger(t)})
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff([]load{{e.f.cert, "ok"}}, rec.take()); d != "" {
				t.Fatalf("first load reports (-want +got):\n%s", d)
			}
			for i, s := range tc.steps {
				s.do(t, e)
				if got := kp.Check(); got != s.wantChanged {
					t.Errorf("step %d: Check = %v, want %v", i, got, s.wantChanged)
				}
				want := e.old
				if s.wantNew {
					want = e.new
				}
				got := kp.Current()
				if got.Leaf.SerialNumber.Cmp(want.Cert.SerialNumber) != 0 {
					t.Errorf("step %d: serial %v in use, want %v (new: %v)", i, got.Leaf.SerialNumber, want.Cert.SerialNumber, s.wantNew)
				}
				if d := cmp.Diff(s.wantLoads, results(rec.take(), 1)); d != "" {
					t.Errorf("step %d: reports (-want +got):\n%s", i, d)
				}
				if x := rec.expiry[e.f.cert]; !x.Equal(want.Cert.NotAfter) {
					t.Errorf("step %d: expiry %v, want %v", i, x, want.Cert.NotAfter)
				}
			}
		})
	}
}

// TestCurrentLooksAtMostEveryMinCheckInterval: uses between two looks
// get the value in use without touching the disk.
func TestCurrentLooksAtMostEveryMinCheckInterval(t *testing.T) {
	ca := certfiletest.NewCA(t, "test CA")
	leaf := certfiletest.Leaf{CN: "node-a", Usage: x509.ExtKeyUsageClientAuth}
	f := kubeletLayout(t)
	old, next := ca.Issue(t, leaf), ca.Issue(t, leaf)
	f.write(t, old)
	clk := clocktesting.NewFakePassiveClock(time.Now())
	kp, err := certfile.NewKeyPair(f.cert, f.key, certfile.Options{Clock: clk, MinCheckInterval: time.Second, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	first := kp.Current()
	f.write(t, next)
	for _, tc := range []struct {
		after   time.Duration
		wantNew bool
	}{{0, false}, {999 * time.Millisecond, false}, {time.Millisecond, true}} {
		clk.SetTime(clk.Now().Add(tc.after))
		got := kp.Current()
		if (got != first) != tc.wantNew {
			t.Errorf("%v later: new certificate in use = %v, want %v", tc.after, got != first, tc.wantNew)
		}
	}
	if c, err := kp.GetCertificate(nil); err != nil || c.Leaf.SerialNumber.Cmp(next.Cert.SerialNumber) != 0 {
		t.Errorf("GetCertificate = %v, %v; want the new certificate", c, err)
	}
}

func TestNewKeyPairErrors(t *testing.T) {
	ca := certfiletest.NewCA(t, "test CA")
	c := ca.Issue(t, certfiletest.Leaf{CN: "x", Usage: x509.ExtKeyUsageServerAuth})
	other := ca.Issue(t, certfiletest.Leaf{CN: "y", Usage: x509.ExtKeyUsageServerAuth})
	dir := t.TempDir()
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, tc := range []struct {
		name, cert, key, want string
	}{
		{"no files", "", "", "needs a certificate file and a key file"},
		{"missing", filepath.Join(dir, "none.crt"), filepath.Join(dir, "none.key"), "no such file"},
		{"mismatch", write("a.crt", c.CertPEM), write("b.key", other.KeyPEM), "private key does not match"},
		{"key only", write("k.pem", c.KeyPEM), write("k2.pem", c.KeyPEM), "key pair:"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := certfile.NewKeyPair(tc.cert, tc.key, certfile.Options{})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want %q", err, tc.want)
			}
		})
	}
}
