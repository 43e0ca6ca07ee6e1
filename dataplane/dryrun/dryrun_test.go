package dryrun_test

import (
	"context"
	"os"

	"google.golang.org/protobuf/proto"

	"github.com/switchyard-proxy/switchyard/dataplane"
	"github.com/switchyard-proxy/switchyard/dataplane/dryrun"
	switchyardv1 "github.com/switchyard-proxy/switchyard/proto/switchyard/v1"
)

func ExampleDataplane_Apply() {
	dp := dryrun.New(os.Stdout)
	st := &dataplane.State{
		Config: &switchyardv1.NodeConfig{NodeName: "node-a", Mode: switchyardv1.DataplaneMode_DATAPLANE_MODE_DRY_RUN},
		Services: map[string]*switchyardv1.ServiceView{
			"default/web": {
				Namespace: "default", Name: "web", Type: switchyardv1.ServiceType_SERVICE_TYPE_CLUSTER_IP,
				ClusterIps: []string{"10.96.0.10"},
				Ports: []*switchyardv1.ServicePort{
					{Name: "http", Protocol: switchyardv1.Protocol_PROTOCOL_TCP, Port: 80, HasAnyEndpoints: proto.Bool(true)},
					{Name: "metrics", Protocol: switchyardv1.Protocol_PROTOCOL_TCP, Port: 9100, HasAnyEndpoints: proto.Bool(false)},
				},
				ClusterEndpoints: []*switchyardv1.Endpoint{
					{Address: "10.244.1.3", Ports: []*switchyardv1.EndpointPort{{Name: "http", Port: 8080}}, Ready: true, Serving: true},
					{Address: "10.244.0.2", Ports: []*switchyardv1.EndpointPort{{Name: "http", Port: 8080}}, Ready: true, Serving: true},
				},
				HasAnyEndpoints: true,
			},
			"a/empty": {Namespace: "a", Name: "empty"},
		},
	}
	if err := dp.Apply(context.Background(), st, dataplane.ApplyOptions{Full: true}); err != nil {
		panic(err)
	}
	if err := dp.Cleanup(context.Background()); err != nil {
		panic(err)
	}
	// Output:
	// apply full=true services=2
	// config node=node-a zone= mode=dry-run masqueradeAll=false clusterCIDRs= nodeIPs=
	// service a/empty type=UNSPECIFIED clusterIPs=- externalIPs=- lbIPs=- affinity=UNSPECIFIED/0s etp=UNSPECIFIED itp=UNSPECIFIED hcNodePort=0 hasEndpoints=false
	// service default/web type=CLUSTER_IP clusterIPs=10.96.0.10 externalIPs=- lbIPs=- affinity=UNSPECIFIED/0s etp=UNSPECIFIED itp=UNSPECIFIED hcNodePort=0 hasEndpoints=true
	//   port http TCP/80 nodePort=0 hasEndpoints=true
	//   port metrics TCP/9100 nodePort=0 hasEndpoints=false
	//   endpoint cluster 10.244.0.2 ports=http:8080 ready=true serving=true terminating=false local=false
	//   endpoint cluster 10.244.1.3 ports=http:8080 ready=true serving=true terminating=false local=false
	// cleanup
}

// ExampleRender_nodeConfig: node port addresses and service CIDRs are
// printed only when the control plane sets them.
func ExampleRender_nodeConfig() {
	st := &dataplane.State{Config: &switchyardv1.NodeConfig{
		NodeName: "node-a", NodeIps: []string{"10.200.0.10"},
		NodePortAddresses: []string{"primary", "192.168.0.0/16"}, ServiceCidrs: []string{"10.96.0.0/16"},
	}}
	os.Stdout.WriteString(dryrun.Render(st, dataplane.ApplyOptions{}))
	// Output:
	// apply full=false services=0
	// config node=node-a zone= mode=unspecified masqueradeAll=false clusterCIDRs= nodeIPs=10.200.0.10 nodePortAddresses=primary,192.168.0.0/16 serviceCIDRs=10.96.0.0/16
}
