package conversion

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/flowcontrol"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/stencil-operator/stencil/api/v1alpha1"
)

var (
	migrating = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "stencil_storage_migration_remaining",
		Help: "Resources of a kind still to rewrite at its CRD's storage version (0 once status.storedVersions holds that version only).",
	}, []string{"kind"})
	migrationRefused = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "stencil_storage_migration_refused",
		Help: "Resources of a kind whose rewrite at the storage version the API server refused in the migration's last pass (each has a StorageMigrationRefused event); the migration goes on past them and tries them again.",
	}, []string{"kind"})
)

func init() { metrics.Registry.MustRegister(migrating, migrationRefused) }

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
	// Recorder, when not nil, tells a resource whose rewrite was refused
	// (a Warning event).
	Recorder events.EventRecorder
	Log      logr.Logger
}

// NeedLeaderElection is true: one replica migrates.
func (m *Migrator) NeedLeaderElection() bool { return true }

// Start migrates each CRD, and tries a CRD whose migration failed (its
// webhook not ready yet, a conflict) again, after a second, doubling up to
// five minutes, until every one is done or ctx ends.
func (m *Migrator) Start(ctx context.Context) error {
	limiter := flowcontrol.NewTokenBucketRateLimiter(max(m.QPS, 1), 1)
	left := slices.Clone(m.CRDs)
	for backoff := time.Second; len(left) > 0; backoff = min(2*backoff, 5*time.Minute) {
		var failed []string
		for _, name := range left {
			if err := m.Migrate(ctx, name, limiter); err != nil {
				if ctx.Err() != nil {
					return nil //nolint:nilerr // stopped: the next start goes on
				}
				m.Log.Error(err, "Migrating stored resources to the storage version; trying again", "crd", name, "in", backoff)
				failed = append(failed, name)
			}
		}
		if left = failed; len(left) == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(backoff):
		}
	}
	return nil
}

// Migrate rewrites the resources of one CRD when its status.storedVersions
// holds another version than its storage version. A resource whose
// rewrite the API server refuses (its conversion fails, an admission
// refuses it) is told (a Warning event, the metric
// stencil_storage_migration_refused) and passed: the others are rewritten,
// and Migrate fails naming it, so that Start tries again later.
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
	m.Log.Info("Migrating stored resources to the storage version", "kind", kind, "storage", storage, "storedVersions", crd.Status.StoredVersions)
	rewritten := 0
	var refused []string
	for page := ""; ; {
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(gvk.GroupVersion().WithKind(kind + "List"))
		if err := m.Client.List(ctx, list, client.Limit(migrationPage), client.Continue(page)); err != nil {
			return fmt.Errorf("listing %s: %w", kind, err)
		}
		remaining := len(list.Items)
		if rest := list.GetRemainingItemCount(); rest != nil {
			remaining += int(*rest)
		}
		for i := range list.Items {
			migrating.WithLabelValues(kind).Set(float64(remaining - i))
			if err := limiter.Wait(ctx); err != nil {
				return err
			}
			item := &list.Items[i]
			if why, ok := item.GetAnnotations()[v1alpha1.AnnotationConversionFailed]; ok {
				// A placeholder (see [placeholder]): written back, it
				// would store no spec.
				refused = append(refused, item.GetNamespace()+"/"+item.GetName())
				m.refused(item, storage, fmt.Errorf("it did not convert to %s: %s", storage, why))
				continue
			}
			err := m.Client.Update(ctx, item)
			// Written since the list, or deleted: stored at the storage
			// version already, or gone.
			if err != nil && !apierrors.IsConflict(err) && !apierrors.IsNotFound(err) {
				if ctx.Err() != nil {
					return ctx.Err()
				}
				refused = append(refused, item.GetNamespace()+"/"+item.GetName())
				m.refused(item, storage, err)
				continue
			}
			rewritten++
		}
		if page = list.GetContinue(); page == "" {
			break
		}
	}
	migrationRefused.WithLabelValues(kind).Set(float64(len(refused)))
	if len(refused) > 0 {
		return fmt.Errorf("rewrote %d resources of %s at %s; the API server refused %d, which keep the older version in storedVersions: %s", rewritten, kind, storage, len(refused), strings.Join(refused[:min(len(refused), 10)], ", "))
	}
	migrating.WithLabelValues(kind).Set(0)
	// Every resource is at the storage version now (a write since the list
	// stored it there too): only it stays in storedVersions, unless the
	// storage version changed meanwhile.
	var old []string
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		fresh := &apiextensionsv1.CustomResourceDefinition{}
		if err := m.Client.Get(ctx, types.NamespacedName{Name: name}, fresh); err != nil {
			return err
		}
		if storageVersion(fresh) != storage {
			return fmt.Errorf("the storage version changed from %s to %s during the migration", storage, storageVersion(fresh))
		}
		old = fresh.Status.StoredVersions
		fresh.Status.StoredVersions = []string{storage}
		return m.Client.Status().Update(ctx, fresh)
	})
	if err != nil {
		return fmt.Errorf("writing status.storedVersions [%s]: %w", storage, err)
	}
	m.Log.Info("Migrated stored resources to the storage version", "kind", kind, "resources", rewritten, "storedVersions", []string{storage}, "was", old)
	return nil
}

// refused tells of a resource whose rewrite at storage was refused.
func (m *Migrator) refused(item *unstructured.Unstructured, storage string, err error) {
	m.Log.Error(err, "The API server refused a resource's rewrite at the storage version; the migration goes on without it", "kind", item.GetKind(), "resource", item.GetNamespace()+"/"+item.GetName(), "storage", storage)
	if m.Recorder != nil {
		m.Recorder.Eventf(item, nil, "Warning", "StorageMigrationRefused", "Migrate",
			"stencil could not rewrite this resource at the storage version %s (%v); until it can, the CRD keeps the older version in status.storedVersions", storage, err)
	}
}

// migrationPage is how many resources one list of the migration reads.
const migrationPage = 500

func storageVersion(crd *apiextensionsv1.CustomResourceDefinition) string {
	for _, v := range crd.Spec.Versions {
		if v.Storage {
			return v.Name
		}
	}
	return ""
}
