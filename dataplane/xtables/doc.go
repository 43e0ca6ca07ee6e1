// Package xtables is the iptables-save/restore tooling the data-plane
// modes share, apart from any one mode (as kube-proxy keeps
// pkg/util/iptables beside pkg/proxy/iptables): the iptables mode
// (dataplane/iptables) and the IPVS mode (dataplane/ipvs) both use it,
// and neither imports the other.
//
// What it holds:
//   - Flavour (legacy or nft), which with a dataplane.Family (IPv4 →
//     iptables, IPv6 → ip6tables) names the binaries (Flavour.SaveCmd,
//     Flavour.RestoreCmd, Flavour.Binary);
//   - DetectFlavour, which picks legacy or nft the way kube-proxy's
//     iptables-wrapper does;
//   - ParseSave and SavedTable: iptables-save output read back by table,
//     chains in output order, rules as after "-A <chain> ";
//   - SameRules and CanonRule: rules compared in a canonical form, since
//     iptables-save reorders matches and respells values; RuleTarget, the
//     -j/-g target of a rule;
//   - CleanupPayload: the iptables-restore --noflush input that removes
//     what an Ownership says is a mode's from a read-back, written a table
//     at a time by WriteTableCleanup (which kubeproxycleanup writes its
//     own plan with); KubeProxyCanary and HasKubeProxy, kube-proxy's
//     evidence every cleanup defers to.
//
// The commands run through command.Runner (package command), the one
// seam to the kernel every mode uses; this package has no runner of its
// own.
//
// Invariants:
//   - No mode's names. Which chains, jumps and sets are a mode's is given
//     by the mode (Ownership); the only chain this package knows by name
//     is kube-proxy's canary. It imports no mode package.
//   - No I/O but DetectFlavour, which only reads (iptables-save through
//     the caller's Runner). Everything else is a pure function of text;
//     writing is the caller's.
//   - ParseSave never fails: what it cannot reproduce (a table
//     iptables-nft-save calls incompatible, a line of unknown syntax)
//     sets opaque, and an opaque read-back must never be written back as
//     a whole table. (kubeproxycleanup keeps a stricter parser of its own
//     that refuses such a dump outright.)
//   - SameRules errs towards "different", which only costs a rewrite:
//     the canonical form only unquotes, sorts option groups (a flag with
//     its values, negation kept), folds long flags, drops the defaults
//     iptables-save adds and respells addresses and probabilities as the
//     kernel keeps them.
//   - CleanupPayload is deterministic (tables sorted, chains in read-back
//     order), touches only what the Ownership names, keeps an owned chain
//     a foreign rule still jumps to (emptied), and plans nothing for a
//     read-back it has already cleaned.
//   - DetectFlavour runs *-legacy-save, which creates legacy tables in the
//     namespace it runs in: the Runner must be bound to the node's (or a
//     throwaway) namespace.
package xtables
