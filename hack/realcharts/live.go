package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/stencil-operator/stencil/api/v1alpha1"
	"github.com/stencil-operator/stencil/internal/dev/chartimport"
	"github.com/stencil-operator/stencil/internal/dev/localcluster"
	"github.com/stencil-operator/stencil/pkg/stencil"
	"github.com/stencil-operator/stencil/render"
)

// liveTimeout bounds each step of a chart's run: Ready, converged again
// after a value change, gone after the deletion.
const liveTimeout = 6 * time.Minute

// liveChart is one chart run on the local control plane.
type liveChart struct {
	dir  string
	name string
	def  render.Definition
	// change is the value the run changes (a top-level key of the chart's
	// values), and to what.
	change string
	to     any
	// Ready, Changed and Gone are each step's outcome: "" not run, "yes",
	// or why not.
	ready, changed, gone string
}

// runLive runs every chart's import on one local control plane: its CRD,
// an operator of its own, and per chart a resource of its default
// values in a namespace of its own, one chart after the other, that must
// become Ready, then converge
// after a value change, then leave nothing of stencil's when deleted. It
// prints a table.
func runLive(dirs []string) error {
	ctx := context.Background()
	var charts []*liveChart
	for _, dir := range dirs {
		lc, err := prepare(dir)
		if err != nil {
			fmt.Printf("| %s | %v | | |\n", filepath.Base(dir), err)
			continue
		}
		charts = append(charts, lc)
	}
	cluster, err := localcluster.Start(ctx, localcluster.Options{Nodes: 2})
	if err != nil {
		return fmt.Errorf("starting the local control plane (make tools builds its binaries): %w", err)
	}
	defer func() { _ = cluster.Stop() }()
	cl, err := liveClient(cluster)
	if err != nil {
		return err
	}
	opCtx, stop := context.WithCancel(ctx)
	defer stop()
	// An operator per chart: every chart kind's Go type is one type
	// (chartimport.Resource), which one scheme holds for one kind only.
	for i, lc := range charts {
		if err := installCRD(ctx, cl, lc.def); err != nil {
			return err
		}
		project := stencil.Project{Name: fmt.Sprintf("realcharts-%d", i), Kinds: []stencil.Kind{stencil.Kind(lc.def)}}
		go func() {
			// Fifteen operators start at once on a small machine.
			err := project.Run(opCtx, []string{"--kubeconfig=" + cluster.Kubeconfig, "--metrics-bind-address=0", "--health-probe-bind-address=0", "--startup-timeout=10m"}, os.Stderr)
			if err != nil && !errors.Is(err, context.Canceled) {
				fmt.Fprintln(os.Stderr, "the operator of", lc.name+":", err)
			}
		}()
	}
	go provisionVolumes(opCtx, cl)
	// One chart at a time: two charts of one cluster may want one host
	// port (prometheus-node-exporter's, and prometheus's subchart's).
	for _, lc := range charts {
		lc.run(ctx, cl)
	}
	fmt.Println("| chart | default values Ready | a value changed, Ready again | deleted, nothing left |")
	fmt.Println("|---|---|---|---|")
	failed := false
	for _, lc := range charts {
		fmt.Printf("| %s | %s | %s (%s) | %s |\n", lc.name, lc.ready, lc.changed, lc.change, lc.gone)
		failed = failed || lc.ready != "yes" || lc.changed != "yes" || lc.gone != "yes"
	}
	if failed {
		return errors.New("some charts did not run through")
	}
	return nil
}

// prepare imports the chart at dir as a kind of its own.
func prepare(dir string) (*liveChart, error) {
	c, err := chartimport.Load(dir)
	if err != nil {
		return nil, err
	}
	kind := chartimport.Camel(c.Name)
	def, err := chartimport.Definition(dir, schema.GroupVersionKind{Group: "charts.example.com", Version: "v1alpha1", Kind: kind})
	if err != nil {
		return nil, err
	}
	lc := &liveChart{dir: dir, name: c.Name + " " + version(c), def: def}
	var values map[string]any
	_ = yaml.Unmarshal(c.Files["values.yaml"], &values)
	for _, key := range []string{"nameOverride", "fullnameOverride", "podAnnotations", "podLabels", "commonLabels", "commonMetaLabels", "extraLabels"} {
		if _, ok := values[key]; ok {
			lc.change, lc.to = key, "renamed"
			if !strings.HasSuffix(key, "Override") {
				lc.to = map[string]any{"realcharts": "changed"}
			}
			break
		}
	}
	return lc, nil
}

// run creates the chart's resource, changes a value and deletes it.
func (lc *liveChart) run(ctx context.Context, cl client.Client) {
	ns := strings.ToLower(lc.def.GroupVersionKind.Kind)
	if len(ns) > 60 {
		ns = ns[:60]
	}
	if err := cl.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		lc.ready = err.Error()
		return
	}
	cr := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{}}}
	cr.SetGroupVersionKind(lc.def.GroupVersionKind)
	cr.SetNamespace(ns)
	cr.SetName("rel")
	if err := cl.Create(ctx, cr); err != nil {
		lc.ready = err.Error()
		return
	}
	if lc.ready = outcome(waitReady(ctx, cl, cr)); lc.ready != "yes" {
		lc.ready += "; " + podsOf(ctx, cl, ns)
		return
	}
	if lc.change == "" {
		lc.changed = "no value to change"
	} else {
		patch, _ := json.Marshal(map[string]any{"spec": map[string]any{lc.change: lc.to}})
		if err := cl.Patch(ctx, cr, client.RawPatch(types.MergePatchType, patch)); err != nil {
			lc.changed = err.Error()
		} else {
			lc.changed = outcome(waitReady(ctx, cl, cr))
		}
	}
	uid := cr.GetUID()
	if err := cl.Delete(ctx, cr); err != nil {
		lc.gone = err.Error()
		return
	}
	lc.gone = outcome(wait.PollUntilContextTimeout(ctx, time.Second, liveTimeout, true, func(ctx context.Context) (bool, error) {
		err := cl.Get(ctx, client.ObjectKeyFromObject(cr), cr.DeepCopy())
		if !apierrors.IsNotFound(err) {
			return false, nil
		}
		left, err := leftOf(ctx, cl, lc.def, ns, uid)
		return left == "", err
	}))
}

func outcome(err error) string {
	if err == nil {
		return "yes"
	}
	return strings.ReplaceAll(err.Error(), "|", "/")
}

// waitReady waits until the resource's Ready condition is True for its
// latest generation.
func waitReady(ctx context.Context, cl client.Client, cr *unstructured.Unstructured) error {
	var last string
	err := wait.PollUntilContextTimeout(ctx, time.Second, liveTimeout, true, func(ctx context.Context) (bool, error) {
		got := cr.DeepCopy()
		if err := cl.Get(ctx, client.ObjectKeyFromObject(cr), got); err != nil {
			return false, err
		}
		conditions, _, _ := unstructured.NestedSlice(got.Object, "status", "conditions")
		for _, c := range conditions {
			m, _ := c.(map[string]any)
			if m["type"] != v1alpha1.ConditionReady {
				continue
			}
			last = fmt.Sprintf("%v: %v", m["reason"], m["message"])
			generation, _ := m["observedGeneration"].(int64)
			if m["status"] == "True" && generation == got.GetGeneration() {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		return fmt.Errorf("not Ready in %s: %s", liveTimeout, last)
	}
	return nil
}

// podsOf says, of the pods and claims of ns, those not running or bound,
// and why.
func podsOf(ctx context.Context, cl client.Client, ns string) string {
	var out []string
	pods := &corev1.PodList{}
	_ = cl.List(ctx, pods, client.InNamespace(ns))
	for _, p := range pods.Items {
		if p.Status.Phase == corev1.PodRunning || p.Status.Phase == corev1.PodSucceeded {
			continue
		}
		why := []string{string(p.Status.Phase)}
		for _, c := range p.Status.Conditions {
			if c.Status != corev1.ConditionTrue && c.Message != "" {
				why = append(why, c.Message)
			}
		}
		out = append(out, "pod "+p.Name+" "+strings.Join(why, ": "))
	}
	claims := &corev1.PersistentVolumeClaimList{}
	_ = cl.List(ctx, claims, client.InNamespace(ns))
	for _, c := range claims.Items {
		if c.Status.Phase != corev1.ClaimBound {
			out = append(out, "claim "+c.Name+" "+string(c.Status.Phase))
		}
	}
	return fmt.Sprintf("%d pods: %s", len(pods.Items), strings.Join(out, "; "))
}

// leftOf names the objects of stencil's for the resource uid that are
// still there: of every type the kind owns, and its generated values.
func leftOf(ctx context.Context, cl client.Client, def render.Definition, ns string, uid types.UID) (string, error) {
	k, err := render.Load(def)
	if err != nil {
		return "", err
	}
	var left []string
	for _, t := range k.Declaration().Owns {
		list := &metav1.PartialObjectMetadataList{}
		list.SetGroupVersionKind(t.GroupVersionKind().GroupVersion().WithKind(t.Kind + "List"))
		if err := cl.List(ctx, list, client.MatchingLabels{v1alpha1.LabelOwnerUID: string(uid)}); err != nil {
			continue // a type the cluster does not serve has none
		}
		for _, item := range list.Items {
			left = append(left, t.Kind+" "+item.Namespace+"/"+item.Name)
		}
	}
	if err := cl.Get(ctx, client.ObjectKey{Namespace: ns, Name: "stencil-generated-" + string(uid)}, &corev1.Secret{}); err == nil {
		left = append(left, "the Secret of generated values")
	}
	return strings.Join(left, ", "), nil
}

func liveClient(cluster *localcluster.Cluster) (client.Client, error) {
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		return nil, err
	}
	if err := apiextensionsv1.AddToScheme(s); err != nil {
		return nil, err
	}
	return client.New(cluster.Config, client.Options{Scheme: s})
}

// installCRD creates the kind's CRD and waits until it is served.
func installCRD(ctx context.Context, cl client.Client, def render.Definition) error {
	crd, err := chartimport.CRD(def, render.Plural(def.GroupVersionKind.Kind))
	if err != nil {
		return err
	}
	if err := cl.Create(ctx, crd); err != nil {
		return err
	}
	return wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		_, err := cl.RESTMapper().RESTMapping(def.GroupVersionKind.GroupKind(), def.GroupVersionKind.Version)
		return err == nil, nil
	})
}

// provisionVolumes binds every pending claim to a new host-path volume,
// as a cluster's storage provisioner would: the local control plane has
// none, and a StatefulSet's pods wait for their claims.
func provisionVolumes(ctx context.Context, cl client.Client) {
	_ = wait.PollUntilContextCancel(ctx, time.Second, true, func(ctx context.Context) (bool, error) {
		claims := &corev1.PersistentVolumeClaimList{}
		_ = cl.List(ctx, claims) // none this time: the next
		for _, pvc := range claims.Items {
			if pvc.Status.Phase != corev1.ClaimPending || pvc.Spec.VolumeName != "" {
				continue
			}
			size := pvc.Spec.Resources.Requests[corev1.ResourceStorage]
			if size.IsZero() {
				size = resource.MustParse("1Gi")
			}
			class := ""
			if pvc.Spec.StorageClassName != nil {
				class = *pvc.Spec.StorageClassName
			}
			pv := &corev1.PersistentVolume{
				ObjectMeta: metav1.ObjectMeta{Name: "pv-" + string(pvc.UID)},
				Spec: corev1.PersistentVolumeSpec{
					Capacity:                      corev1.ResourceList{corev1.ResourceStorage: size},
					AccessModes:                   pvc.Spec.AccessModes,
					StorageClassName:              class,
					PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimDelete,
					ClaimRef:                      &corev1.ObjectReference{Namespace: pvc.Namespace, Name: pvc.Name, UID: pvc.UID},
					PersistentVolumeSource:        corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/tmp/" + string(pvc.UID)}},
				},
			}
			_ = cl.Create(ctx, pv)
		}
		return false, nil
	})
}
