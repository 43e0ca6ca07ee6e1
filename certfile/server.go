package certfile

import (
	"crypto/tls"
)

// ServerConfig is a TLS server configuration that serves the certificate
// getCert returns (KeyPair.GetCertificate, or an issuer's) and, when
// clientCAs is not nil, requires client certificates that verify against
// the bundle current at each handshake: GetConfigForClient hands every
// handshake a copy of the configuration with the current pool, since
// crypto/tls reads ClientCAs only from the configuration of the handshake.
// The returned configuration's own ClientCAs is the pool at the time of
// the call, and its ClientAuth says whether clients must authenticate.
func ServerConfig(getCert func(*tls.ClientHelloInfo) (*tls.Certificate, error), clientCAs *Bundle) *tls.Config {
	cfg := &tls.Config{GetCertificate: getCert, MinVersion: tls.VersionTLS12}
	if clientCAs == nil {
		return cfg
	}
	cfg.ClientAuth = tls.RequireAndVerifyClientCert
	cfg.ClientCAs = clientCAs.Pool()
	base := cfg.Clone()
	cfg.GetConfigForClient = func(*tls.ClientHelloInfo) (*tls.Config, error) {
		c := base.Clone()
		c.ClientCAs = clientCAs.Pool()
		return c, nil
	}
	return cfg
}
