// Package cluster owns the real-cluster test bed: a Kubernetes cluster on
// one machine, with no Docker engine and no registry, on which Switchyard
// runs the way users run it — deploy/ applied with kubectl apply -k, its
// Deployment and DaemonSet as pods on real kubelets, fed by the real
// EndpointSlice controller.
//
//	client ns (kubectl, probes) ─┐
//	control ns: etcd, kube-apiserver, kube-controller-manager, kube-scheduler
//	                             ├── br0 (net ns) ──┬─ node-0: kubelet + containerd + runc, CNI bridge cbr0 ── pods
//	                             │                  └─ node-1: …
//
// A node is a network namespace from e2e/testbed/netns (NoPodBridge: the
// CNI bridge plugin owns cbr0) plus a private mount and UTS namespace held
// by a sleeping holder process that containerd, kubelet and every command
// for the node join with nsenter. In that mount namespace the node has its
// own /run and /var (runc state, shim sockets, /run/xtables.lock, pod logs,
// /var/lib/{kubelet,containerd,cni,switchyard-agent}) and files holding the
// values kubelet wants bound over the machine-wide sysctls it would write.
// Images are OCI archives from package images, imported into each node's
// containerd; kubelet never pulls. Kubelets join through TLS bootstrap (a
// bootstrap token, CSRs approved and signed by kube-controller-manager), so
// each holds a real, rotating client certificate — the identity the mTLS
// overlay's agents present.
//
// Another version of Switchyard installs the same way: AddCheckout checks
// another commit out as a detached git worktree and builds its images
// under their own tag, and InstallSwitchyardFrom applies that commit's
// deploy/ through that commit's own overlays, over a running install if
// there is one (an upgrade or downgrade, as kubectl apply rolls it).
//
// The bed is IPv4 only unless Config.DualStack: then every namespace and
// pod also has an IPv6 address (fd00:201::/64 network, fd00:244::/56 pods,
// a /64 per node), kube-apiserver serves 10.96.0.0/16 and fd00:96::/112
// (IPv4 primary), kubelets report both node addresses, the CNI hands out
// one address of each family, and Switchyard's control plane is given
// both pod CIDRs.
//
// Invariants:
//   - The machine's own network namespace and sysctls are never changed:
//     every process and client runs inside the bed's namespaces (package
//     launch checks each against the topology's host guard), and a dial from
//     Go goes through DialContext or a PodRunner, never from this process's
//     namespace, where a cluster address would leave the machine.
//   - Down kills by PID, cgroup and mount namespace — never by name —
//     removes the cgroups and namespaces, and fails when Leftovers finds
//     anything of the cluster still on the machine.
//   - The overlays in overlays/ change only what a bed must (image tags,
//     node addresses, the API server's address, the pod CIDR); deploy/ is
//     referenced, never copied.
package cluster
