package translate

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"sigs.k8s.io/yaml"
)

// fuzzSeeds are realistic objects the fuzzer mutates.
var fuzzSeeds = []string{
	`apiVersion: v1
kind: Service
metadata: {namespace: default, name: web, labels: {app: web}}
spec:
  type: LoadBalancer
  clusterIP: 10.96.0.10
  clusterIPs: [10.96.0.10, "fd00::a"]
  ipFamilies: [IPv4, IPv6]
  externalIPs: [192.0.2.1]
  externalTrafficPolicy: Local
  healthCheckNodePort: 32000
  internalTrafficPolicy: Cluster
  sessionAffinity: ClientIP
  sessionAffinityConfig: {clientIP: {timeoutSeconds: 300}}
  loadBalancerSourceRanges: [" 10.0.0.0/8", "fd00::/8"]
  trafficDistribution: PreferClose
  ports:
  - {name: http, protocol: TCP, port: 80, targetPort: 8080, nodePort: 30080}
  - {name: dns, protocol: UDP, port: 53, nodePort: 30053}
status:
  loadBalancer:
    ingress:
    - {ip: 203.0.113.1}
    - {ip: 203.0.113.2, ipMode: Proxy}
    - {hostname: lb.example.com}
`,
	`apiVersion: v1
kind: Service
metadata: {namespace: kube-system, name: kube-dns}
spec: {clusterIP: None, ports: [{port: 53, protocol: UDP}]}
`,
	`apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  namespace: default
  name: web-abc12
  labels: {kubernetes.io/service-name: web}
  annotations: {endpoints.kubernetes.io/last-change-trigger-time: "2026-03-01T12:00:00Z"}
addressType: IPv4
ports:
- {name: http, protocol: TCP, port: 8080}
- {name: dns, port: 53}
endpoints:
- addresses: [10.1.0.1]
  conditions: {ready: true, serving: true, terminating: false}
  nodeName: node-a
  zone: zone-1
  hints: {forZones: [{name: zone-1}], forNodes: [{name: node-a}]}
- addresses: ["10.1.0.2", "10.1.0.3"]
  conditions: {ready: false, serving: true, terminating: true}
- addresses: ["2001:db8::1"]
`,
	`{"kind":"EndpointSlice","metadata":{"namespace":"ns","name":"s","labels":{"kubernetes.io/service-name":"svc"}},` +
		`"addressType":"IPv6","ports":[{"port":443}],"endpoints":[{"addresses":["2001:DB8::0001"]},{"addresses":["::ffff:1.2.3.4"]}]}`,
	`apiVersion: v1
kind: Node
metadata: {name: node-a, labels: {topology.kubernetes.io/zone: zone-1}}
status:
  addresses:
  - {type: InternalIP, address: 10.0.0.5}
  - {type: ExternalIP, address: "2001:db8::5"}
  - {type: Hostname, address: node-a}
`,
}

// FuzzTranslate feeds arbitrary YAML or JSON, decoded as each kind, to the
// translators: they must never panic, must fail only with a recorded skip,
// and must return only values that keep the model's invariants.
func FuzzTranslate(f *testing.F) {
	for _, seed := range fuzzSeeds {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var svc corev1.Service
		if yaml.Unmarshal(data, &svc) == nil {
			fuzzOne(t, &svc, Service, checkService)
		}
		var slice discoveryv1.EndpointSlice
		if yaml.Unmarshal(data, &slice) == nil {
			fuzzOne(t, &slice, EndpointSlice, checkSlice)
		}
		var node corev1.Node
		if yaml.Unmarshal(data, &node) == nil {
			fuzzOne(t, &node, Node, checkNode)
		}
	})
}

func fuzzOne[In, Out any](t *testing.T, in *In, translate func(*In, Recorder) (*Out, error), check func(*Out) error) {
	t.Helper()
	counts := NewCounts()
	got, err := translate(in, counts)
	if err != nil {
		reason, ok := SkipReason(err)
		if !ok {
			t.Fatalf("error is not a skip: %v", err)
		}
		if got != nil {
			t.Fatalf("skip %v with a result", err)
		}
		if counts.Total() == 0 || reason == "" {
			t.Fatalf("skip %v not recorded: %s", err, counts)
		}
		return
	}
	if err := check(got); err != nil {
		t.Fatalf("invariants: %v\ninput: %+v", err, in)
	}
	again, _ := translate(in, nil)
	if diff := cmpDiff(got, again); diff != "" {
		t.Fatalf("translation not deterministic (-first +second):\n%s", diff)
	}
}
