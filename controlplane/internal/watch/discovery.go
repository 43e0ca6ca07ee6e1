package watch

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"time"

	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery"
)

// servesServiceCIDRs asks the API whether it serves ServiceCIDRs
// (networking.k8s.io/v1, GA in 1.33). An informer of a resource the API
// does not serve never syncs, and the control plane would never become
// ready: on an older server, or one with the resource disabled, the
// watch goes without them and NodeConfigs carry no service ranges.
// Transient failures are retried until ctx ends, as the informers would
// retry their lists.
func servesServiceCIDRs(ctx context.Context, d discovery.ServerResourcesInterface, log *slog.Logger) (bool, error) {
	gv := networkingv1.SchemeGroupVersion.String()
	rd := discovery.ToServerResourcesInterfaceWithContext(d)
	served := false
	err := wait.PollUntilContextCancel(ctx, time.Second, true, func(ctx context.Context) (bool, error) {
		list, err := rd.ServerResourcesForGroupVersionWithContext(ctx, gv)
		switch {
		case apierrors.IsNotFound(err):
			return true, nil
		case err != nil:
			log.Warn("API discovery failed, retrying", "groupVersion", gv, "err", err)
			return false, nil
		}
		served = slices.ContainsFunc(list.APIResources, func(r metav1.APIResource) bool { return r.Name == "servicecidrs" })
		return true, nil
	})
	if err != nil {
		return false, fmt.Errorf("watch: discover %s servicecidrs: %w", gv, err)
	}
	return served, nil
}
