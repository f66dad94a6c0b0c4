package render

import (
	"errors"
	"fmt"
	"maps"
	"strings"
	"text/template"

	"github.com/Masterminds/sprig/v3"
	"sigs.k8s.io/yaml"

	"github.com/stencil-operator/stencil/api/v1alpha1"
)

// impure lists the sprig functions that read the clock, randomness, the
// environment or the network. Render must be a pure function of its input,
// so templates cannot call them.
var impure = []string{
	"ago", "date", "dateInZone", "dateModify", "mustDateModify", "htmlDate", "htmlDateInZone", "now", "unixEpoch",
	"date_in_zone", "date_modify", "must_date_modify", // the same, under sprig's older names
	"randAlphaNum", "randAlpha", "randAscii", "randNumeric", "randInt", "randBytes", "shuffle", "uuidv4",
	"env", "expandenv", "getHostByName",
	"bcrypt", "htpasswd", "encryptAES",
	"genPrivateKey", "genCA", "genCAWithKey", "genSelfSignedCert", "genSelfSignedCertWithKey",
	"genSignedCert", "genSignedCertWithKey", "buildCustomCert",
}

// funcs is the template function library: sprig's (the library Helm charts
// use) without its impure functions, plus Helm's toYaml, include and
// required. include runs a named template of t.
func funcs(t *template.Template) template.FuncMap {
	fm := sprig.TxtFuncMap()
	for _, name := range impure {
		delete(fm, name)
	}
	fm[tick] = func() string { return "" }              // metered checks the time in it
	fm[fnPrinted] = func(_ int, v any) any { return v } // and the printed values in this
	fm["toYaml"] = toYaml
	fm["required"] = required
	fm["ownerLabels"] = ownerLabels
	fm[fnNeed] = need
	maps.Copy(fm, graphFuncStubs())
	maps.Copy(fm, generatedStubs())
	fm[fnCapabilities] = capabilitiesFunc(&budget{})
	fm["fromYaml"] = fromYaml
	fm["fromYamlArray"] = fromYamlArray
	fm["fromJsonArray"] = fromYamlArray
	fm["lookup"] = lookup
	fm["tpl"] = func(string, any) (string, error) { return "", errors.New("tpl: only in a render") }
	fm["include"] = func(name string, data any) (string, error) {
		var buf strings.Builder
		err := t.ExecuteTemplate(&buf, name, data)
		return buf.String(), err
	}
	return fm
}

// required fails the render with msg when v is empty.
func required(msg string, v any) (any, error) {
	if v == nil {
		return nil, errors.New(msg)
	}
	if s, ok := v.(string); ok && s == "" {
		return nil, errors.New(msg)
	}
	return v, nil
}

// toYaml renders v as YAML without a trailing newline, for use with nindent.
func toYaml(v any) (string, error) {
	out, err := yaml.Marshal(v)
	if err != nil {
		return "", fmt.Errorf("toYaml: %w", err)
	}
	return strings.TrimSuffix(string(out), "\n"), nil
}

// ownerLabels are the labels that tie an object that stencil does not apply
// itself (a pod from a Deployment's pod template) to the custom resource cr,
// so that a kind can observe it: stencil's cache holds only objects with
// these labels. Use it in pod templates:
//
//	labels:
//	  {{- ownerLabels . | toYaml | nindent 8 }}
func ownerLabels(cr v1alpha1.Object) map[string]string {
	return map[string]string{
		v1alpha1.LabelManagedBy: v1alpha1.ManagedByStencil,
		v1alpha1.LabelOwnerUID:  string(cr.GetUID()),
	}
}

// fromYaml reads a YAML (or JSON) map; as in Helm, a document that is not
// one is a map with the error under "Error".
func fromYaml(s string) map[string]any {
	m := map[string]any{}
	if err := yaml.Unmarshal([]byte(s), &m); err != nil {
		m["Error"] = err.Error()
	}
	return m
}

// fromYamlArray reads a YAML (or JSON) list; as in Helm, a document that
// is not one is a list of the error.
func fromYamlArray(s string) []any {
	var a []any
	if err := yaml.Unmarshal([]byte(s), &a); err != nil {
		return []any{err.Error()}
	}
	return a
}

// lookup is Helm's read of a live object. A render is a pure function of
// the custom resource: a template reads other objects through the inputs
// _kind.yaml declares (the input function), which stencil watches.
func lookup(apiVersion, kind, namespace, name string) (map[string]any, error) {
	return nil, fmt.Errorf("lookup %s %s %q: a render reads only the custom resource and the inputs its _kind.yaml declares; declare the object under inputs and read it with input (docs/from-helm.md)", apiVersion, kind, name)
}
