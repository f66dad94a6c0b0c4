package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"text/tabwriter"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stencil-operator/stencil/api/v1alpha1"
	"github.com/stencil-operator/stencil/reconciler"
	"github.com/stencil-operator/stencil/reconciler/engine"
	"github.com/stencil-operator/stencil/render"
)

// fleetOptions tune `diff --all`.
type fleetOptions struct {
	// templates is --templates: the kinds' folders ("": the built-in).
	templates   string
	verbose     bool
	concurrency int
	qps         float32
	burst       int
}

// resourceDiff is what this binary's templates would do to one existing
// custom resource.
type resourceDiff struct {
	kind, namespace, name string
	// err: the render failed, or the API server could not answer.
	err    error
	render bool // err is a render failure
	// Objects that would be created, changed or pruned, as
	// "Kind namespace/name".
	created, changed, pruned []string
	diffs                    []string
	// left are objects in the way that are not the resource's: stencil
	// leaves them alone, upgrade or not.
	left []string
	// kept are the objects prune would delete if the applies went through,
	// as "Kind namespace/name"; keptWhy says why they do not (see
	// diffResource). They are not counted as pruned.
	kept    []string
	keptWhy string
}

func (d *resourceDiff) different() bool {
	return len(d.created)+len(d.changed)+len(d.pruned) > 0
}

// runFleetDiff renders every custom resource of every kind in the cluster
// with this binary's templates and compares each object with the live one
// by a server-side dry-run apply: nothing is written. It prints a summary
// per kind and, verbose, what differs per resource with its diffs. It
// reports whether anything differs and whether anything failed.
func runFleetDiff(ctx context.Context, project *operator, o fleetOptions, out io.Writer) (different, failed bool, err error) {
	loaded, err := project.kindsIn(o.templates)
	if err != nil {
		return false, false, err
	}
	c, err := newClientWith(project, o.qps, o.burst)
	if err != nil {
		return false, false, err
	}
	var diffs []*resourceDiff
	for _, k := range loaded {
		crs, err := listAll(ctx, c, k)
		if err != nil {
			return false, false, err
		}
		live := &liveObjects{reader: c}
		if len(crs) > 0 {
			live.prefetch(ctx, c, k)
		}
		diffs = append(diffs, diffAll(ctx, c, live, k, crs, o.concurrency)...)
	}
	if o.verbose {
		if err := printDetails(out, diffs); err != nil {
			return false, false, err
		}
	}
	if err := printSummary(out, loaded, diffs); err != nil {
		return false, false, err
	}
	for _, d := range diffs {
		different = different || d.different()
		failed = failed || d.err != nil
	}
	return different, failed, nil
}

// listAll reads every custom resource of a kind, in every namespace.
func listAll(ctx context.Context, c client.Client, k *render.Kind) ([]v1alpha1.Object, error) {
	gvk := k.GroupVersionKind()
	crs, err := reconciler.ListResources(ctx, c, c.Scheme(), gvk)
	if meta.IsNoMatchError(err) {
		return nil, nil // the CRD is not installed: no resources
	}
	if err != nil {
		return nil, fmt.Errorf("listing %s: %w", gvk.Kind, err)
	}
	return crs, nil
}

// diffAll diffs the resources of one kind, at most concurrency at a time
// (the client's QPS bounds the requests too).
func diffAll(ctx context.Context, c client.Client, live *liveObjects, k *render.Kind, crs []v1alpha1.Object, concurrency int) []*resourceDiff {
	out := make([]*resourceDiff, len(crs))
	sem := make(chan struct{}, max(concurrency, 1))
	var wg sync.WaitGroup
	for i, cr := range crs {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			out[i] = diffResource(ctx, c, live, k, cr)
		})
	}
	wg.Wait()
	return out
}

// diffResource renders one live custom resource and diffs each object.
// It counts as pruned only what the operator would prune: the operator
// prunes after every apply went through, and never after an empty render
// (FAILING here), an apply the API server refuses (FAILING too: the dry run
// is refused), or an object in the way (kept).
func diffResource(ctx context.Context, c client.Client, live *liveObjects, k *render.Kind, cr v1alpha1.Object) *resourceDiff {
	d := &resourceDiff{kind: k.GroupVersionKind().Kind, namespace: cr.GetNamespace(), name: cr.GetName()}
	gen, err := reconciler.ReadGenerated(ctx, c, k, cr)
	if err != nil {
		d.err = err
		return d
	}
	plan, err := k.RenderGraph(cr, render.GraphInput{Live: reconciler.ReadSnapshot(ctx, c), Generated: gen})
	if err != nil {
		d.err, d.render = err, true
		return d
	}
	objs := plan.Objects
	if len(plan.Waiting) == 0 && engine.EmptyRender(cr, objs) {
		d.err = fmt.Errorf("renders no objects; stencil will not prune its %d objects (reason %s)", len(cr.StencilStatus().Inventory), v1alpha1.ReasonEmptyRender)
		return d
	}
	rendered := map[string]bool{}
	var inTheWay []string // objects whose apply the operator leaves: then it prunes nothing
	for _, o := range objs {
		name := o.GetKind() + " " + objectName(o.GetNamespace(), o.GetName())
		rendered[groupKey(o.GroupVersionKind().Group, o.GetKind(), o.GetNamespace(), o.GetName())] = true
		current, err := live.get(ctx, o)
		if err != nil {
			d.err = err
			return d
		}
		diff, err := diffObjectOf(ctx, c, o, current, cr.StencilDriftPolicy() == v1alpha1.DriftReport)
		if errors.Is(err, engine.ErrNotOurs) || err == nil && current != nil && current.GetDeletionTimestamp() != nil {
			// Someone else's, or on its way out: the operator leaves it
			// (OwnershipConflict) until it goes, and prunes nothing.
			inTheWay = append(inTheWay, name)
		}
		switch {
		case errors.Is(err, engine.ErrNotOurs):
			d.left = append(d.left, err.Error())
			continue
		case err != nil:
			d.err = err
			return d
		case diff == "":
			continue
		case current != nil:
			d.changed = append(d.changed, name)
		default:
			d.created = append(d.created, name)
		}
		d.diffs = append(d.diffs, diff)
	}
	owned, err := live.ownedBy(ctx, cr)
	if err != nil {
		d.err = err
		return d
	}
	var prunable []string
	for _, item := range owned {
		gvk := item.GroupVersionKind()
		if !rendered[groupKey(gvk.Group, gvk.Kind, item.GetNamespace(), item.GetName())] && engine.Prunable(k.GroupVersionKind(), cr, item) {
			prunable = append(prunable, gvk.Kind+" "+objectName(item.GetNamespace(), item.GetName()))
		}
	}
	if len(plan.Waiting) > 0 && len(prunable) > 0 {
		// As the operator: nothing is pruned while nodes of a graph wait.
		d.kept, d.keptWhy = prunable, "stencil prunes nothing while nodes of the graph wait ("+plan.Waiting[0].String()+")"
		return d
	}
	if len(inTheWay) > 0 && len(prunable) > 0 {
		is := " is"
		if len(inTheWay) > 1 {
			is = " are"
		}
		d.kept, d.keptWhy = prunable, "stencil prunes nothing while "+strings.Join(inTheWay, ", ")+is+" in the way"
		return d
	}
	d.pruned = prunable
	return d
}

// liveObjects reads live objects: those stencil labelled from one list per
// owned type made up front, others (not labelled, or absent) one by one.
type liveObjects struct {
	reader client.Reader
	listed map[string]*unstructured.Unstructured // by groupKey
	// byOwner holds the listed objects by owner UID label; listedTypes are
	// the owned types whose list succeeded.
	byOwner     map[string][]*unstructured.Unstructured
	listedTypes map[schema.GroupKind]bool
}

// groupKey names an object by group, kind, namespace and name, as prune
// does: another version of the same type is the same object.
func groupKey(group, kind, namespace, name string) string {
	return group + "/" + kind + "/" + namespace + "/" + name
}

// prefetch lists the objects of a kind's owned types that stencil
// labelled, in every namespace. A list that fails leaves its objects to be
// read one by one.
func (l *liveObjects) prefetch(ctx context.Context, c client.Reader, k *render.Kind) {
	l.listed, l.byOwner, l.listedTypes = map[string]*unstructured.Unstructured{}, map[string][]*unstructured.Unstructured{}, map[schema.GroupKind]bool{}
	for _, t := range k.Declaration().Owns {
		list := &unstructured.UnstructuredList{}
		gvk := t.GroupVersionKind()
		list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
		if err := c.List(ctx, list, client.MatchingLabels{v1alpha1.LabelManagedBy: v1alpha1.ManagedByStencil}); err != nil {
			continue
		}
		l.listedTypes[gvk.GroupKind()] = true
		for i := range list.Items {
			o := &list.Items[i]
			o.SetGroupVersionKind(gvk)
			l.listed[groupKey(gvk.Group, gvk.Kind, o.GetNamespace(), o.GetName())] = o
			if uid := o.GetLabels()[v1alpha1.LabelOwnerUID]; uid != "" {
				l.byOwner[uid] = append(l.byOwner[uid], o)
			}
		}
	}
}

// get is the live object of o, nil when there is none.
func (l *liveObjects) get(ctx context.Context, o *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	gvk := o.GroupVersionKind()
	if live, ok := l.listed[groupKey(gvk.Group, gvk.Kind, o.GetNamespace(), o.GetName())]; ok && live.GetAPIVersion() == o.GetAPIVersion() {
		return live, nil
	}
	return readLive(ctx, l.reader, o)
}

// ownedBy is what prune would look at for cr: the listed objects with its
// owner label, and the objects of its inventory of types not listed, read
// one by one.
func (l *liveObjects) ownedBy(ctx context.Context, cr v1alpha1.Object) ([]*unstructured.Unstructured, error) {
	out := slices.Clone(l.byOwner[string(cr.GetUID())])
	for _, e := range cr.StencilStatus().Inventory {
		gv, err := schema.ParseGroupVersion(e.APIVersion)
		if err != nil {
			continue
		}
		if l.listedTypes[schema.GroupKind{Group: gv.Group, Kind: e.Kind}] {
			continue // in byOwner
		}
		probe := &unstructured.Unstructured{}
		probe.SetGroupVersionKind(gv.WithKind(e.Kind))
		probe.SetNamespace(e.Namespace)
		probe.SetName(e.Name)
		item, err := readLive(ctx, l.reader, probe)
		if err != nil && !meta.IsNoMatchError(err) && !apierrors.IsForbidden(err) {
			return nil, err // a type no longer served, or not readable, is not pruned either
		}
		if item != nil {
			out = append(out, item)
		}
	}
	return out, nil
}

func objectName(namespace, name string) string {
	if namespace == "" {
		return name
	}
	return namespace + "/" + name
}

// printDetails prints, per resource that differs or failed, what would
// happen and the diffs.
func printDetails(w io.Writer, diffs []*resourceDiff) error {
	for _, d := range sorted(diffs) {
		if !d.different() && d.err == nil && len(d.left)+len(d.kept) == 0 {
			continue
		}
		var b strings.Builder
		fmt.Fprintf(&b, "# %s %s\n", d.kind, objectName(d.namespace, d.name))
		if d.err != nil {
			fmt.Fprintf(&b, "#   error: %v\n", d.err)
		}
		for _, l := range d.left {
			fmt.Fprintf(&b, "#   %s\n", l)
		}
		for _, list := range []struct {
			verb  string
			names []string
		}{{"create", d.created}, {"change", d.changed}, {"prune", d.pruned}} {
			for _, n := range list.names {
				fmt.Fprintf(&b, "#   %s %s\n", list.verb, n)
			}
		}
		for _, n := range d.kept {
			fmt.Fprintf(&b, "#   keep %s: %s\n", n, d.keptWhy)
		}
		for _, diff := range d.diffs {
			b.WriteString(diff)
		}
		if _, err := io.WriteString(w, b.String()); err != nil {
			return err
		}
	}
	return nil
}

func sorted(diffs []*resourceDiff) []*resourceDiff {
	out := slices.Clone(diffs)
	slices.SortFunc(out, func(a, b *resourceDiff) int {
		return strings.Compare(a.kind+"/"+a.namespace+"/"+a.name, b.kind+"/"+b.namespace+"/"+b.name)
	})
	return out
}

// printSummary prints one line per kind: resources unchanged, changed and
// failing, and objects that would be created, changed and pruned.
func printSummary(w io.Writer, loaded []*render.Kind, diffs []*resourceDiff) error {
	type counts struct{ resources, unchanged, changed, failing, create, change, prune int }
	byKind := map[string]*counts{}
	var names []string
	for _, k := range loaded {
		names = append(names, k.GroupVersionKind().Kind)
		byKind[k.GroupVersionKind().Kind] = &counts{}
	}
	slices.Sort(names)
	for _, d := range diffs {
		c := byKind[d.kind]
		c.resources++
		switch {
		case d.err != nil:
			c.failing++
		case d.different():
			c.changed++
		default:
			c.unchanged++
		}
		c.create, c.change, c.prune = c.create+len(d.created), c.change+len(d.changed), c.prune+len(d.pruned)
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	// tabwriter reports a write error at Flush.
	_, _ = fmt.Fprintln(tw, "KIND\tRESOURCES\tUNCHANGED\tCHANGED\tFAILING\tCREATE\tCHANGE\tPRUNE")
	for _, n := range names {
		c := byKind[n]
		_, _ = fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\n", n, c.resources, c.unchanged, c.changed, c.failing, c.create, c.change, c.prune)
	}
	return tw.Flush()
}
