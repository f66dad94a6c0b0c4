package engine

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/pmezard/go-difflib/difflib"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"

	"github.com/stencil-operator/stencil/api/v1alpha1"
)

// This file is the drift step of an apply: what needs no write is settled
// here (settle), and the fields our manager lost are reported, and
// corrected or not (onDrift), with the report a person reads in status
// (Report).

// settle acts on a verdict that may need no write: it leaves a conflict
// alone, handles the fields the verdict found missing (onDrift), and
// records in out what it did. It returns whether d must be written
// (stale). A create is written at once: no object, no drift.
func (a *Applier) settle(ctx context.Context, d *unstructured.Unstructured, v verdict, report bool, out *ApplyOutcome) (stale bool, err error) {
	switch v.decision {
	case create:
		return true, nil
	case leave:
		c := out.of(d)
		c.Action, c.Conflict = Skipped, v.conflict
		return false, nil // a conflict is reported in status, and the other objects are still applied
	}
	write, deferred, err := a.onDrift(ctx, d, v, report, out)
	switch {
	case err != nil:
		return false, err
	case deferred:
		out.change(d, Deferred)
	case v.decision == wait:
		out.change(d, Waiting)
	case v.decision == relabeled:
		out.change(d, Configured)
	case !write:
		out.change(d, Unchanged)
	default:
		return true, nil
	}
	return false, nil
}

// onDrift handles the fields d's verdict found missing: it reports them,
// and corrects them unless report; in a fight it corrects only when the
// wait is over, and shows the fight meanwhile. It returns whether d must be
// applied (write), and whether its correction waits (deferred).
func (a *Applier) onDrift(ctx context.Context, d *unstructured.Unstructured, v verdict, report bool, out *ApplyOutcome) (write, deferred bool, err error) {
	now, key := time.Now(), KeyOf(d)
	if v.missing == nil || v.missing.Empty() {
		if f, fighting := a.fights.calm(key, now); fighting {
			out.of(d).Fight = &f // still shown until it is over
		}
		return v.stale(), false, nil
	}
	if f, fighting := a.fights.Fighting(key, now); fighting && !report {
		if now.Before(f.Until) {
			out.of(d).Fight = &f
			return false, true, nil
		}
		// The fight goes on: correct again, without a new report.
		f, _ = a.fights.Corrected(key, f.Drift, now)
		out.of(d).Fight = &f
		out.FightCorrections++
		return true, false, nil
	}
	drift, err := a.Report(ctx, d, v.missing)
	if err != nil {
		return false, false, err
	}
	drift.Reverted = !report
	switch {
	case len(drift.Fields) == 0:
	case !drift.Reverted:
		out.of(d).Drift = append(out.of(d).Drift, drift)
	default:
		f, started := a.fights.Corrected(key, drift, now)
		if started {
			out.FightsStarted++
			out.FightCorrections++
			out.of(d).Fight = &f
		} else {
			out.of(d).Drift = append(out.of(d).Drift, drift)
		}
	}
	return v.stale() || !report, false, nil
}

// Report describes the drift of d: for each field our manager lost whose
// live value differs from the desired one, the two values, who holds it now
// and since when, and a short unified diff. A field another manager holds
// with the very value the template sets is not drift. It reads the full
// live object, once per drifted object; no Fields means no drift.
func (a *Applier) Report(ctx context.Context, d *unstructured.Unstructured, missing *fieldpath.Set) (v1alpha1.ObjectDrift, error) {
	live := &unstructured.Unstructured{}
	live.SetGroupVersionKind(d.GroupVersionKind())
	if err := a.reader.Get(ctx, client.ObjectKeyFromObject(d), live); err != nil {
		return v1alpha1.ObjectDrift{}, fmt.Errorf("reading drifted %s %s: %w", d.GetKind(), client.ObjectKeyFromObject(d), err)
	}
	report := v1alpha1.ObjectDrift{
		APIVersion: d.GetAPIVersion(),
		Kind:       d.GetKind(),
		Namespace:  d.GetNamespace(),
		Name:       d.GetName(),
	}
	secret := d.GetKind() == "Secret" && d.GroupVersionKind().Group == ""
	missing.Leaves().Iterate(func(path fieldpath.Path) {
		if len(report.Fields) == v1alpha1.MaxDriftFields {
			return // fieldpath.Set.All ignores a break: its range loop would panic
		}
		f := v1alpha1.FieldDrift{Path: Cut(path.String(), v1alpha1.MaxPathBytes)}
		var inDesired, inLive bool
		f.Desired, inDesired = valueAt(d.Object, path)
		f.Live, inLive = valueAt(live.Object, path)
		if inDesired && inLive && f.Desired == f.Live {
			return
		}
		if secret {
			f.Desired, f.Live = mask(f.Desired), mask(f.Live)
		}
		f.Desired, f.Live = Cut(f.Desired, v1alpha1.MaxValueBytes), Cut(f.Live, v1alpha1.MaxValueBytes)
		f.Manager, f.Time = holder(live.GetManagedFields(), path.Copy(), FieldManager)
		report.Fields = append(report.Fields, f)
	})
	report.Diff = fieldDiff(report)
	return report, nil
}

// reportLeftOut adds to out the drift in the fields an apply of d left out
// for other managers (policy Report).
func (a *Applier) reportLeftOut(ctx context.Context, d *unstructured.Unstructured, leftOut *fieldpath.Set, out *ApplyOutcome) error {
	if leftOut == nil || leftOut.Empty() {
		return nil
	}
	drift, err := a.Report(ctx, d, leftOut)
	if err != nil {
		return err
	}
	if len(drift.Fields) > 0 {
		out.of(d).Drift = append(out.of(d).Drift, drift)
	}
	return nil
}

// holder finds the manager, other than ours, that now holds path.
func holder(entries []metav1.ManagedFieldsEntry, path fieldpath.Path, ours string) (string, *metav1.Time) {
	for _, e := range entries {
		if e.Manager == ours && e.Operation == metav1.ManagedFieldsOperationApply || e.FieldsV1 == nil {
			continue
		}
		s := &fieldpath.Set{}
		if s.FromJSON(e.FieldsV1.GetRawReader()) == nil && s.Has(path) {
			return e.Manager, e.Time
		}
	}
	return "", nil
}

// masked replaces the values of Secret data in drift reports.
const masked = "(masked)"

func mask(v string) string {
	if v == "" {
		return ""
	}
	return masked
}

// fieldDiff is a unified diff of the drifted fields (their values already
// cut to MaxValueBytes), desired against live, cut to MaxDiffBytes.
func fieldDiff(o v1alpha1.ObjectDrift) string {
	var desired, live []string
	for _, f := range o.Fields {
		desired = append(desired, f.Path+": "+orAbsent(f.Desired)+"\n")
		live = append(live, f.Path+": "+orAbsent(f.Live)+"\n")
	}
	diff, err := difflib.GetUnifiedDiffString(difflib.UnifiedDiff{
		A: desired, B: live,
		FromFile: "desired/" + o.Kind + "/" + o.Name,
		ToFile:   "live/" + o.Kind + "/" + o.Name,
		Context:  0,
	})
	if err != nil {
		return ""
	}
	return Cut(strings.TrimSuffix(diff, "\n"), v1alpha1.MaxDiffBytes)
}

func orAbsent(v string) string {
	if v == "" {
		return "(absent)"
	}
	return v
}
