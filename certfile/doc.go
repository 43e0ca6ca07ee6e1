// Package certfile keeps TLS material read from files current without a
// restart: a certificate and its key (KeyPair) and a bundle of CA
// certificates (Bundle), reloaded when their files change. Both tiers use
// it: the node agent for the kubelet's rotating client certificate and the
// control plane's CA bundle, the control plane for cert-manager's serving
// certificate and the agents' CA. It is a module of its own because
// nodeagent and controlplane are separate modules that cannot share an
// internal package, and neither proto (the API) nor dataplane (the
// kernel) is a home for it.
//
// How a change is noticed: os.Stat of every file (following symlinks)
// compared with the last look: the file's identity (device and inode),
// size and modification time. Both ways Kubernetes replaces files give a
// new inode: the kubelet writes a new kubelet-client-<date>.pem and swaps
// the kubelet-client-current.pem symlink; Secret and ConfigMap volumes
// swap a ..data symlink onto a new directory. Only a changed stat reads
// the files, and only changed contents (sha256) are parsed, so a look
// costs one stat per file. Files are looked at on use (a handshake), at
// most once per Options.MinCheckInterval, and by Watch every interval,
// so that metrics and logs follow the disk when nothing connects.
//
// Invariants:
//   - The first load must succeed (New… returns its error); after it, the
//     value in use is always one that parsed completely: a missing file,
//     a partial write, garbage, or a key that does not match its
//     certificate keeps the last good value.
//   - Every version of the files that cannot be used is logged (warn)
//     and reported to Options.Observer once (Loaded with the error); a
//     file that stays missing is reported once, not at every look.
//   - Every value taken into use is logged (info) and reported (Loaded
//     with nil, then Expiry with its NotAfter; a bundle's is its first
//     certificate to expire).
//   - A value's pointer changes exactly when new content is taken into
//     use, so callers compare pointers to know what they presented.
//   - A bundle is all or nothing: one certificate that does not parse, or
//     trailing bytes that are not PEM (a write cut short), rejects the
//     version, so a half-written old+new bundle never drops a CA.
//
// What a new value changes: the next TLS handshake. Connections already
// established keep the certificates of their handshake; the node agent
// reconnects once when its client certificate rotated (see
// nodeagent/internal/tlscreds), the control plane keeps its connections.
package certfile
