package ctl

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
)

// dial returns a client connection to o.Server with o's credentials. It
// does not connect yet: the first RPC does, under its timeout.
func dial(o *Options) (*grpc.ClientConn, error) {
	creds, err := transportCredentials(o)
	if err != nil {
		return nil, err
	}
	opts := []grpc.DialOption{grpc.WithTransportCredentials(creds)}
	tok, err := o.bearerToken()
	if err != nil {
		return nil, err
	}
	if tok != "" {
		opts = append(opts, grpc.WithPerRPCCredentials(bearer(tok)))
	}
	conn, err := grpc.NewClient(o.Server, opts...)
	if err != nil {
		return nil, fmt.Errorf("--server %q: %w", o.Server, err)
	}
	return conn, nil
}

// transportCredentials builds the agent's TLS (same files, same minimum
// version), with --server-name as tls.Config.ServerName: empty lets gRPC
// verify the dialled host, "localhost" for a unix socket.
func transportCredentials(o *Options) (credentials.TransportCredentials, error) {
	if o.Insecure {
		return insecure.NewCredentials(), nil
	}
	pem, err := os.ReadFile(o.CAFile)
	if err != nil {
		return nil, fmt.Errorf("--ca-file: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("--ca-file %s: no PEM certificate", o.CAFile)
	}
	cfg := &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12, ServerName: o.ServerName}
	if o.CertFile != "" {
		cert, err := tls.LoadX509KeyPair(o.CertFile, o.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("--cert-file/--key-file: %w", err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return credentials.NewTLS(cfg), nil
}

// bearer sends a Kubernetes bearer token the way adminauth reads it.
type bearer string

var _ credentials.PerRPCCredentials = bearer("")

func (b bearer) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": "Bearer " + string(b)}, nil
}

// RequireTransportSecurity keeps gRPC itself from ever sending the token
// in plaintext, whatever the flag checks allowed.
func (bearer) RequireTransportSecurity() bool { return true }
