// Package tlscreds is the agent's TLS to the control plane: gRPC
// transport credentials that build each handshake from the files as they
// are now, and the one reconnect per rotation that puts a rotated client
// certificate on the wire.
//
//	--ca-file ───────▶ certfile.Bundle ──RootCAs──────────────┐
//	--cert-file/--key-file ─▶ certfile.KeyPair ──presented──▶ handshake (Credentials, per connection)
//	Run: every WatchInterval, look at both files; the client certificate
//	     of the last handshake is not the current one ──▶ Reconnect() ──▶ discovery.Client
//
// Invariants:
//   - Verification is crypto/tls's own, never InsecureSkipVerify: each
//     handshake gets a fresh tls.Config whose RootCAs is the bundle in use
//     and whose ServerName is the one the credentials were made for (or
//     the dialled host, as gRPC's own TLS credentials do). A
//     VerifyConnection callback could not do the same: on the client,
//     tls.ConnectionState.ServerName is the SNI, empty when the dialled
//     name is an IP address, which learnt addresses are.
//   - The client certificate is sent whatever CAs the server names, so a
//     refusal says why ("unknown authority") instead of "certificate
//     required".
//   - An established connection keeps its session: a new bundle or a new
//     certificate is used from the next handshake. Only a rotated client
//     certificate asks for a reconnect, and once: Reconnect() is signalled
//     when the certificate the last successful handshake presented is not
//     the one in use, at most once per certificate, and only while
//     someone receives (a stream is open; between streams the next
//     handshake presents the new certificate anyway). A new CA bundle or
//     a renewed server certificate asks for nothing: the session was
//     verified when it was made.
//   - A reconnect touches only the gRPC connection: the stream resumes
//     with initial_resource_versions, so the control plane sends only what
//     changed and the dataplane is not resynced.
//   - Files that cannot be read keep the last good value (package
//     certfile), logged and counted per version.
package tlscreds
