// Package issuer gives the control plane TLS with no dependency: a CA it
// keeps in a Secret of its namespace, and serving certificates it issues
// itself from that CA.
//
// What must hold:
//   - One CA per install. The first replica to start creates the Secret;
//     a replica that loses the race (AlreadyExists) reads the winner's, so
//     every replica serves certificates agents verify with one bundle.
//   - The CA's private key exists only in that Secret and in the control
//     plane's memory. Agents get the CA certificate alone, from a
//     ConfigMap (the bundle), which every replica makes hold the
//     Secret's certificate; a kubelet can read what its pods mount, so no
//     key may be in anything an agent mounts.
//   - Serving certificates never leave the process: each replica issues
//     its own, in memory, for the names and addresses it is reached by
//     (its node's addresses with hostNetwork, the Service's DNS names), and
//     issues a new one before two thirds of its lifetime have passed, so
//     renewal needs no restart and no other component.
//   - A Secret that exists but does not hold a CA key pair is an error to
//     report, never something to overwrite: agents may trust it.
//   - A bundle that holds the CA among others is kept as it is, so that a
//     CA rotation can go through a bundle of the old and the new CA
//     (agents reload it, package certfile); one without the CA is
//     replaced by the CA alone.
//
// The CA is read at start only: a replica notices a new CA in the Secret
// when it restarts. Rotating it without a moment when agents trust
// neither (README, "Rotating certificates"): publish a bundle of the old
// and the new CA, write the new CA into the Secret, restart the replicas
// one by one (each issues its serving certificate from the new CA and
// keeps the bundle), then publish the new CA alone. After a compromise,
// delete the Secret and the bundle and restart the control plane instead:
// a new CA is created and published alone.
package issuer
