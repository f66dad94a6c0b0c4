package render

import (
	"fmt"

	"sigs.k8s.io/yaml"

	"github.com/stencil-operator/stencil/api/v1alpha1"
)

// LiveState is what a kind's status template reads: the live objects.
type LiveState struct {
	// Owned holds the live objects of the owned types declared with
	// status: true (as the cache keeps them: see TypeRef.Status) or whole:
	// true, by "<Kind>/<name>".
	Owned map[string]any
	// Observed holds the live objects of each observed type, by kind,
	// sorted by name.
	Observed map[string][]map[string]any
}

// statusData is the status template's data: {{ .Object }} is the custom
// resource, {{ .Owned }} and {{ .Observed }} the live objects.
type statusData struct {
	Object   v1alpha1.Object
	Owned    map[string]any
	Observed map[string][]map[string]any
}

// HasStatus reports whether the kind has a status template (_status.yaml).
func (k *Kind) HasStatus() bool { return k.status }

// RenderStatus runs the kind's status template, which projects live state
// into the kind's own status fields, and returns those fields. Like Render,
// it is pure.
func (k *Kind) RenderStatus(cr v1alpha1.Object, live LiveState) (map[string]any, error) {
	if !k.status {
		return nil, nil
	}
	data := statusData{Object: cr, Owned: live.Owned, Observed: live.Observed}
	if data.Owned == nil {
		data.Owned = map[string]any{}
	}
	if data.Observed == nil {
		data.Observed = map[string][]map[string]any{}
	}
	for _, t := range k.declaration.Observes {
		if _, ok := data.Observed[t.Kind]; !ok {
			data.Observed[t.Kind] = []map[string]any{}
		}
	}
	run, err := k.execution(k.limits.StatusBytes, "status bytes")
	if err != nil {
		return nil, &Error{File: statusFile, Err: err}
	}
	defer k.runs.put(run)
	out, err := run.execute(statusFile, data)
	if err != nil {
		return nil, &Error{File: statusFile, Err: err}
	}
	fields := map[string]any{}
	if err := yaml.Unmarshal(out, &fields); err != nil {
		return nil, &Error{File: statusFile, Err: fmt.Errorf("output is not a YAML map: %w", err)}
	}
	for key := range fields {
		if v1alpha1.IsSharedStatusField(key) {
			return nil, &Error{File: statusFile, Err: fmt.Errorf("status.%s belongs to stencil; a status template may not set it", key)}
		}
	}
	return fields, nil
}

// StatusTypes are the declared types whose objects the status template
// reads: owned types marked status: true or whole: true, and observed
// types.
func (k *Kind) StatusTypes() []TypeRef {
	var types []TypeRef
	for _, t := range k.declaration.Owns {
		if t.Status || t.Whole {
			types = append(types, t)
		}
	}
	return append(types, k.declaration.Observes...)
}
