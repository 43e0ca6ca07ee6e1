package certfile_test

import (
	"crypto/x509"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/switchyard-proxy/switchyard/certfile"
	"github.com/switchyard-proxy/switchyard/certfile/certfiletest"
)

// TestBundleRotation walks a CA rotation with an overlapping bundle, as
// a ConfigMap volume delivers it (..data swap): old CA, old and new, new
// only; and a bundle written in place that a reader sees cut short, or
// that holds garbage, never drops a CA.
func TestBundleRotation(t *testing.T) {
	oldCA, newCA := certfiletest.NewCA(t, "old CA"), certfiletest.NewCA(t, "new CA")
	leaf := certfiletest.Leaf{CN: "switchyard-controlplane", DNS: []string{"switchyard-controlplane"}, Usage: x509.ExtKeyUsageServerAuth}
	byOld, byNew := oldCA.Issue(t, leaf), newCA.Issue(t, leaf)
	both := certfiletest.Bundle(oldCA, newCA)
	dir := t.TempDir()
	volume := func(b []byte) func(t *testing.T) {
		return func(t *testing.T) { certfiletest.WriteVolume(t, dir, map[string][]byte{"ca.crt": b}) }
	}
	file := filepath.Join(dir, "ca.crt")
	inPlace := func(b []byte) func(t *testing.T) {
		return func(t *testing.T) { certfiletest.WriteInPlace(t, filepath.Join(dir, "..data", "ca.crt"), b) }
	}
	volume(oldCA.PEM())(t)
	rec := &recorder{}
	b, err := certfile.NewBundle(file, certfile.Options{Observer: rec, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	rec.take()
	for _, s := range []struct {
		name            string
		do              func(t *testing.T)
		wantChanged     bool
		trustOld, trust bool // whether a leaf of the old, of the new CA verifies
		wantLoads       []string
		wantExpiry      time.Time
	}{
		{"old and new", volume(both), true, true, true, []string{"ok"}, oldCA.Cert.NotAfter},
		{"new only, cut short", inPlace(newCA.PEM()[:200]), false, true, true, []string{"bytes"}, oldCA.Cert.NotAfter},
		{"old and new with garbage after", inPlace(append(append([]byte(nil), both...), "garbage"...)), false, true, true, []string{"bytes"}, oldCA.Cert.NotAfter},
		{"a certificate that does not parse", inPlace([]byte("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n")), false, true, true, []string{"PEM"}, oldCA.Cert.NotAfter},
		{"no certificate", inPlace([]byte("\n")), false, true, true, []string{"no"}, oldCA.Cert.NotAfter},
		{"new only", volume(newCA.PEM()), true, false, true, []string{"ok"}, newCA.Cert.NotAfter},
	} {
		s.do(t)
		if got := b.Check(); got != s.wantChanged {
			t.Errorf("%s: Check = %v, want %v", s.name, got, s.wantChanged)
		}
		pool := b.Pool()
		for _, v := range []struct {
			leaf certfiletest.Issued
			want bool
		}{{byOld, s.trustOld}, {byNew, s.trust}} {
			_, err := v.leaf.Cert.Verify(x509.VerifyOptions{Roots: pool, DNSName: "switchyard-controlplane"})
			if (err == nil) != v.want {
				t.Errorf("%s: a certificate of %s verifies: %v, want %v", s.name, v.leaf.Cert.Issuer.CommonName, err == nil, v.want)
			}
		}
		if d := cmp.Diff(s.wantLoads, results(rec.take(), 1)); d != "" {
			t.Errorf("%s: reports (-want +got):\n%s", s.name, d)
		}
		if x := rec.expiry[file]; !x.Equal(s.wantExpiry) {
			t.Errorf("%s: expiry %v, want %v", s.name, x, s.wantExpiry)
		}
	}
}

func TestNewBundleErrors(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name, file string
		data       []byte
		want       string
	}{
		{"no file", "", nil, "needs a file"},
		{"empty", "ca.crt", []byte{}, "no PEM certificate"},
		{"a key", "ca.crt", []byte("-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n"), "no PEM certificate"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			file := tc.file
			if file != "" {
				file = certfiletest.WriteVolume(t, dir, map[string][]byte{tc.file: tc.data})[tc.file]
			}
			_, err := certfile.NewBundle(file, certfile.Options{})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want %q", err, tc.want)
			}
		})
	}
}
