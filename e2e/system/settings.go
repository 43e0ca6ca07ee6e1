package system

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	switchyardv1 "github.com/switchyard-proxy/switchyard/proto/switchyard/v1"
)

// The settings ConfigMap replicas read with Config.Settings, where
// deploy/ puts it.
const (
	SettingsNamespace = "switchyard-system"
	SettingsConfigMap = "switchyard-controlplane"
)

// PutSettings creates or replaces the settings ConfigMap with config.yaml
// yaml (and its namespace, the first time).
func (c *Cluster) PutSettings(ctx context.Context, yaml string) error {
	cs := c.API.Client()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: SettingsNamespace}}
	if _, err := cs.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create namespace %s: %w", SettingsNamespace, err)
	}
	cms := cs.CoreV1().ConfigMaps(SettingsNamespace)
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: SettingsConfigMap}, Data: map[string]string{"config.yaml": yaml}}
	_, err := cms.Update(ctx, cm, metav1.UpdateOptions{})
	if apierrors.IsNotFound(err) {
		_, err = cms.Create(ctx, cm, metav1.CreateOptions{})
	}
	if err != nil {
		return fmt.Errorf("write settings ConfigMap: %w", err)
	}
	return nil
}

// SettingsAt returns where replica i's NodeConfig settings come from, as
// its ListNodes says.
func (c *Cluster) SettingsAt(ctx context.Context, i int) (*switchyardv1.ControlPlaneSettings, error) {
	resp, err := c.listNodesAt(ctx, i)
	return resp.GetSettings(), err
}

// RolloutAt returns the settings rollout as replica i drives it.
func (c *Cluster) RolloutAt(ctx context.Context, i int) (*switchyardv1.GetRolloutResponse, error) {
	return adminAt(c, i, "GetRollout", func(a switchyardv1.AdminServiceClient) (*switchyardv1.GetRolloutResponse, error) {
		return a.GetRollout(ctx, &switchyardv1.GetRolloutRequest{})
	})
}

// ServiceAt returns where a Service is live, as replica i's GetService
// says.
func (c *Cluster) ServiceAt(ctx context.Context, i int, namespace, name string) (*switchyardv1.GetServiceResponse, error) {
	return adminAt(c, i, "GetService "+namespace+"/"+name, func(a switchyardv1.AdminServiceClient) (*switchyardv1.GetServiceResponse, error) {
		return a.GetService(ctx, &switchyardv1.GetServiceRequest{Namespace: namespace, Name: name})
	})
}
