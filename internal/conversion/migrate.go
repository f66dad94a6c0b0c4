package conversion

import (
	"context"
	"fmt"
	"slices"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/flowcontrol"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

var migrating = prometheus.NewGaugeVec(prometheus.GaugeOpts{
	Name: "stencil_storage_migration_remaining",
	Help: "Resources of a kind still to rewrite at its CRD's storage version (0 once status.storedVersions holds that version only).",
}, []string{"kind"})

func init() { metrics.Registry.MustRegister(migrating) }

// DefaultMigrationQPS paces the storage migration: rewrites per second.
const DefaultMigrationQPS = 20

// Migrator rewrites, after a kind's storage version changed, every stored
// resource of it at the new storage version (an update that changes
// nothing but how etcd holds it, as kube-storage-version-migrator does),
// paced, and then removes the other versions from the CRD's
// status.storedVersions, so that an old version can later be dropped from
// the CRD. The leader runs it once at start; a restart starts over, and a
// resource already stored at the new version costs no write (the API
// server skips an update that changes nothing).
type Migrator struct {
	Client client.Client
	// CRDs are the CRDs of the kinds with several versions.
	CRDs []string
	// QPS paces the rewrites.
	QPS float32
	Log logr.Logger
}

// NeedLeaderElection: one replica migrates.
func (m *Migrator) NeedLeaderElection() bool { return true }

// Start migrates each CRD in turn; a failure is logged and the next goes on.
func (m *Migrator) Start(ctx context.Context) error {
	limiter := flowcontrol.NewTokenBucketRateLimiter(max(m.QPS, 1), 1)
	for _, name := range m.CRDs {
		if err := m.Migrate(ctx, name, limiter); err != nil && ctx.Err() == nil {
			m.Log.Error(err, "Migrating stored resources to the storage version; stencil tries again at its next start", "crd", name)
		}
	}
	return nil
}

// Migrate rewrites the resources of one CRD when its status.storedVersions
// holds another version than its storage version.
func (m *Migrator) Migrate(ctx context.Context, name string, limiter flowcontrol.RateLimiter) error {
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := m.Client.Get(ctx, types.NamespacedName{Name: name}, crd); err != nil {
		return fmt.Errorf("reading the CRD: %w", err)
	}
	storage := storageVersion(crd)
	kind := crd.Spec.Names.Kind
	if storage == "" || slices.Equal(crd.Status.StoredVersions, []string{storage}) {
		migrating.WithLabelValues(kind).Set(0)
		return nil
	}
	gvk := schema.GroupVersionKind{Group: crd.Spec.Group, Version: storage, Kind: kind}
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(gvk.GroupVersion().WithKind(kind + "List"))
	if err := m.Client.List(ctx, list); err != nil {
		return fmt.Errorf("listing %s: %w", kind, err)
	}
	m.Log.Info("Migrating stored resources to the storage version", "kind", kind, "storage", storage, "storedVersions", crd.Status.StoredVersions, "resources", len(list.Items))
	remaining := len(list.Items)
	migrating.WithLabelValues(kind).Set(float64(remaining))
	for i := range list.Items {
		if err := limiter.Wait(ctx); err != nil {
			return err
		}
		err := m.Client.Update(ctx, &list.Items[i])
		// Written since the list, or deleted: stored at the storage version
		// already, or gone.
		if err != nil && !apierrors.IsConflict(err) && !apierrors.IsNotFound(err) {
			return fmt.Errorf("rewriting %s %s/%s: %w", kind, list.Items[i].GetNamespace(), list.Items[i].GetName(), err)
		}
		remaining--
		migrating.WithLabelValues(kind).Set(float64(remaining))
	}
	old := crd.Status.StoredVersions
	crd.Status.StoredVersions = []string{storage}
	if err := m.Client.Status().Update(ctx, crd); err != nil {
		return fmt.Errorf("writing status.storedVersions [%s]: %w", storage, err)
	}
	m.Log.Info("Migrated stored resources to the storage version", "kind", kind, "resources", len(list.Items), "storedVersions", crd.Status.StoredVersions, "was", old)
	return nil
}

func storageVersion(crd *apiextensionsv1.CustomResourceDefinition) string {
	for _, v := range crd.Spec.Versions {
		if v.Storage {
			return v.Name
		}
	}
	return ""
}
