// Package metrics defines the agent's Prometheus metrics on a private
// registry.
//
// Names: where kube-proxy has a metric for the same thing, the agent uses
// kube-proxy's exact name (subsystem "kubeproxy"), so existing dashboards
// and alerts keep working:
//
//	kubeproxy_sync_proxy_rules_duration_seconds
//	kubeproxy_sync_full_proxy_rules_duration_seconds
//	kubeproxy_sync_partial_proxy_rules_duration_seconds
//	kubeproxy_sync_proxy_rules_last_timestamp_seconds
//	kubeproxy_sync_proxy_rules_last_queued_timestamp_seconds
//	kubeproxy_network_programming_duration_seconds
//	kubeproxy_sync_proxy_rules_endpoint_changes_total
//	kubeproxy_sync_proxy_rules_service_changes_total
//	kubeproxy_conntrack_reconciler_sync_duration_seconds{ip_family}
//	kubeproxy_conntrack_reconciler_deleted_entries_total{ip_family,reason}
//
// (kube-proxy's deleted-entries counter has ip_family only; the reason
// label is the agent's: sum it away for kube-proxy's series.)
//
// Agent-only metrics use the switchyard_agent_ prefix:
//
//	switchyard_agent_applied_version{version}   1 for the applied system version
//	switchyard_agent_applied_resources          resources in the applied view
//	switchyard_agent_sync_errors_total          failed applies
//	switchyard_agent_nacks_total                NACKs sent
//	switchyard_agent_control_plane_connected{address}
//	switchyard_agent_mode_switches_total
//	switchyard_agent_state_file_rejections_total{reason}  state files not restored (persist.Reason…)
//	switchyard_agent_state_file_write_errors_total       failed pending-record or view writes
//	switchyard_agent_datapath_probes_total{result}       datapath canary probes: ok, failed, skipped
//	switchyard_agent_datapath_healthy                    1 while the canary answers (only with the canary on)
//	switchyard_agent_certificate_reloads_total{file,result}          loads of the TLS files: ok, failed (last good kept)
//	switchyard_agent_certificate_expiry_timestamp_seconds{file}      NotAfter of what is in use (a bundle: its first to expire)
//	switchyard_agent_conntrack_reconcile_errors_total{ip_family}     reconciles that failed to list or delete
//
// kube-proxy persists nothing, so the state-file metrics have no upstream
// name to follow.
//
// All methods are safe on a nil *Metrics (no-ops), so components work
// without metrics in tests.
package metrics
