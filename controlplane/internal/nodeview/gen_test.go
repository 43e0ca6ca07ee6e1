package nodeview

import (
	"fmt"
	"net/netip"

	"github.com/switchyard-proxy/switchyard/controlplane/internal/model"
)

// genSpec describes a synthetic cluster. Generation is deterministic: the
// same spec always gives the same State.
type genSpec struct {
	services     int
	endpoints    int // per service, in one slice
	nodes        int
	zones        int
	localEvery   int // every n-th service is a LoadBalancer with ETP Local; 0: none
	hintedEvery  int // every n-th service has zone hints; 0: none
	itpLocalEach int // every n-th service has ITP Local; 0: none
}

func genNodeName(i int) string { return fmt.Sprintf("node-%04d", i) }

func genState(g genSpec) *model.State {
	st := model.NewState()
	for i := range g.nodes {
		st.Nodes[genNodeName(i)] = &model.Node{
			Name:      genNodeName(i),
			Zone:      fmt.Sprintf("zone-%d", i%g.zones),
			Addresses: []netip.Addr{addrN(0xC0A80000 + uint32(i))}, // 192.168.x.y
		}
	}
	for i := range g.services {
		svc, slice := genService(g, i)
		st.Services[svc.Key] = svc
		st.Slices[svc.Key] = map[model.SliceKey]*model.EndpointSlice{slice.Key: slice}
	}
	return st
}

func genService(g genSpec, i int) (*model.Service, *model.EndpointSlice) {
	key := model.ServiceKey{Namespace: fmt.Sprintf("ns-%03d", i%100), Name: fmt.Sprintf("svc-%05d", i)}
	svc := &model.Service{
		Key:        key,
		Type:       model.TypeClusterIP,
		ClusterIPs: []netip.Addr{addrN(0x0A600000 + uint32(i))}, // 10.96.x.y
		Ports: []model.ServicePort{
			{Name: "http", Protocol: model.ProtocolTCP, Port: 80},
			{Name: "metrics", Protocol: model.ProtocolTCP, Port: 9100},
		},
		ExternalPolicy: model.PolicyCluster,
		InternalPolicy: model.PolicyCluster,
	}
	if g.localEvery > 0 && i%g.localEvery == 0 {
		svc.Type = model.TypeLoadBalancer
		svc.ExternalPolicy = model.PolicyLocal
		svc.HealthCheckNodePort = uint16(30000 + i%2000)
		svc.Ports[0].NodePort = uint16(32000 + i%700)
	}
	if g.itpLocalEach > 0 && i%g.itpLocalEach == 1 {
		svc.InternalPolicy = model.PolicyLocal
	}
	hinted := g.hintedEvery > 0 && i%g.hintedEvery == 2
	slice := &model.EndpointSlice{
		Key:     model.SliceKey{Namespace: key.Namespace, Name: key.Name + "-abcde"},
		Service: key,
		Family:  model.IPv4,
		Ports: []model.EndpointPort{
			{Name: "http", Protocol: model.ProtocolTCP, Port: 8080},
			{Name: "metrics", Protocol: model.ProtocolTCP, Port: 9100},
		},
		Endpoints: make([]model.Endpoint, g.endpoints),
	}
	for k := range g.endpoints {
		n := (i*7 + k*13) % g.nodes
		zone := fmt.Sprintf("zone-%d", n%g.zones)
		ep := model.Endpoint{
			Address:  addrN(0x0A000000 + uint32(i*g.endpoints+k)), // 10.0.0.0/8 pod IPs
			Ready:    true,
			Serving:  true,
			NodeName: genNodeName(n),
			Zone:     zone,
		}
		if hinted {
			ep.HintZones = []string{zone}
		}
		slice.Endpoints[k] = ep
	}
	return svc, slice
}

func addrN(n uint32) netip.Addr {
	return netip.AddrFrom4([4]byte{byte(n >> 24), byte(n >> 16), byte(n >> 8), byte(n)})
}
