package cluster

import (
	"context"
	"fmt"
	"net"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// RESTConfig is the admin kubeconfig as a client-go config whose
// connections are opened inside the client namespace (DialContext): from
// this process's own namespace the API server's address would leave the
// machine. Rate limits are raised so a harness measures the cluster, not
// client-go's default 5 QPS.
func (c *Cluster) RESTConfig() (*rest.Config, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", c.cp.adminKubecfg)
	if err != nil {
		return nil, fmt.Errorf("admin kubeconfig: %w", err)
	}
	cfg.Dial = func(ctx context.Context, _, addr string) (net.Conn, error) { return c.DialContext(ctx, addr) }
	cfg.QPS, cfg.Burst = 200, 400
	return cfg, nil
}

// Clientset is a clientset over RESTConfig.
func (c *Cluster) Clientset() (kubernetes.Interface, error) {
	cfg, err := c.RESTConfig()
	if err != nil {
		return nil, err
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("clientset: %w", err)
	}
	return cs, nil
}
