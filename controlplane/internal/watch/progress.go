package watch

import (
	"context"
	"encoding/json"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/switchyard-proxy/switchyard/controlplane/internal/rollout"
)

// ProgressWriter records a rollout's progress on the settings ConfigMap
// (rollout.ProgressAnnotation): a merge patch of that one annotation,
// conditional on the resourceVersion the progress was decided from, so
// two replicas never both advance a step and a decision on stale
// settings is refused.
type ProgressWriter struct {
	Client          kubernetes.Interface
	Namespace, Name string
}

// WriteProgress patches the annotation; it fails with a Conflict when the
// ConfigMap changed since resourceVersion.
func (w ProgressWriter) WriteProgress(ctx context.Context, p rollout.Progress, resourceVersion string) error {
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{
		"resourceVersion": resourceVersion,
		"annotations":     map[string]string{rollout.ProgressAnnotation: p.String()},
	}})
	if err != nil {
		return err
	}
	_, err = w.Client.CoreV1().ConfigMaps(w.Namespace).Patch(ctx, w.Name, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: "switchyard-controlplane"})
	if err != nil {
		return fmt.Errorf("patch ConfigMap %s/%s: %w", w.Namespace, w.Name, err)
	}
	return nil
}
