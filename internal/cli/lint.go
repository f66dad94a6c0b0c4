package cli

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/apimachinery/pkg/version"
	"sigs.k8s.io/yaml"

	"github.com/stencil-operator/stencil/internal/operator/conversion"
	"github.com/stencil-operator/stencil/internal/operator/kinds"
	"github.com/stencil-operator/stencil/render"
	"github.com/stencil-operator/stencil/render/kindtest"
	renderschema "github.com/stencil-operator/stencil/render/schema"
)

// templateSource is where the offline commands read the kinds' templates
// from, and the CRDs their objects are validated with.
type templateSource struct {
	project   *operator // the operator's kinds, built in
	templates string
	crds      []string
	// apiVersions are the optional owned types the offline cluster serves.
	apiVersions []string
	// kubeVersion is the offline cluster's version, which chart kinds read.
	kubeVersion string
	// renderTime and renderSteps are each render's limits on wall time
	// and on steps.
	renderTime  time.Duration
	renderSteps int
}

func (s *templateSource) bindFlags(cmd *cobra.Command) {
	cmd.Flags().StringVar(&s.templates, "templates", "", "Read the kinds' folders from this folder (laid out as templates/) instead of the built-in ones: edited templates, without rebuilding.")
	cmd.Flags().StringSliceVar(&s.apiVersions, "api-versions", nil, `Optional owned types (optional: true in _kind.yaml) to render as served by the cluster, as "group/version/Kind" or "group/version" (repeat it or separate them with commas), as helm template --api-versions: what (capabilities).APIVersions.Has answers. The kinds' other types count as served; without it no optional type is. A test case's api-versions.txt replaces it for that case.`)
	cmd.Flags().DurationVar(&s.renderTime, "render-timeout", render.DefaultLimits.Time, "How long one render may run (wall time), as the operator's --render-timeout.")
	cmd.Flags().IntVar(&s.renderSteps, "render-max-steps", render.DefaultLimits.Steps, "How many steps one render may take, as the operator's --render-max-steps.")
	cmd.Flags().StringVar(&s.kubeVersion, "kube-version", render.DefaultKubeVersion, "The Kubernetes version chart kinds (stencil import chart) read as .Capabilities.KubeVersion, as helm template --kube-version.")
	cmd.Flags().StringSliceVar(&s.crds, "crds", nil, "Files or folders of CustomResourceDefinitions: the kinds' CRDs default their custom resources, and every CRD validates the objects of its type (default: config/crd/bases and config/crd/external, those in the working directory).")
}

// defaultCRDs are the folders of a project's CustomResourceDefinitions, as
// `stencil init` and `make manifests` lay them out: its kinds' (generated)
// and the third-party types' its templates write (copied in by hand).
var defaultCRDs = []string{"config/crd/bases", "config/crd/external"}

// crdPaths are the --crds given or, when none is, the default folders that
// exist in the working directory.
func (s *templateSource) crdPaths() []string {
	if s.crds != nil {
		return s.crds
	}
	var found []string
	for _, dir := range defaultCRDs {
		if info, err := os.Stat(dir); err == nil && info.IsDir() {
			found = append(found, dir)
		}
	}
	return found
}

// load parses the folders and reads the CRDs into the validator, which
// also defaults custom resources.
func (s *templateSource) load() ([]kinds.Folder, *renderschema.Validator, error) {
	folders, err := s.project.Folders(s.templates)
	if err != nil {
		return nil, nil, err
	}
	servedOffline(folders, s.apiVersions)
	kube, err := render.ParseKubeVersion(s.kubeVersion)
	if err != nil {
		return nil, nil, fmt.Errorf("--kube-version: %w", err)
	}
	limits := render.DefaultLimits
	limits.Time, limits.Steps = s.renderTime, s.renderSteps
	for i := range folders {
		folders[i] = folders[i].WithKubeVersion(kube).WithLimits(limits)
	}
	crds, err := readCRDs(s.crdPaths())
	if err != nil {
		return nil, nil, err
	}
	v, err := renderschema.New(crds...)
	if err != nil {
		return nil, nil, err
	}
	return folders, v, nil
}

// servedOffline tells each kind of folders which of its optional owned
// types the cluster serves: those versions names (--api-versions).
func servedOffline(folders []kinds.Folder, versions []string) {
	if len(versions) == 0 {
		return
	}
	for i := range folders {
		if folders[i].Kind != nil {
			folders[i].Kind = folders[i].Kind.WithAPIVersions(versions)
		}
	}
}

// readCRDs reads every CustomResourceDefinition in the files, and in the
// *.yaml files of the folders, given.
func readCRDs(paths []string) ([]*apiextensionsv1.CustomResourceDefinition, error) {
	var crds []*apiextensionsv1.CustomResourceDefinition
	for _, p := range paths {
		files := []string{p}
		if info, err := os.Stat(p); err != nil {
			return nil, fmt.Errorf("--crds: %w", err)
		} else if info.IsDir() {
			if files, err = filepath.Glob(filepath.Join(p, "*.yaml")); err != nil {
				return nil, err
			}
		}
		for _, f := range files {
			found, err := crdsIn(f)
			if err != nil {
				return nil, err
			}
			crds = append(crds, found...)
		}
	}
	return crds, nil
}

func crdsIn(file string) ([]*apiextensionsv1.CustomResourceDefinition, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	var crds []*apiextensionsv1.CustomResourceDefinition
	reader := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	for {
		doc, err := reader.Read()
		if errors.Is(err, io.EOF) {
			return crds, nil
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", file, err)
		}
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := yaml.Unmarshal(doc, crd); err != nil {
			return nil, fmt.Errorf("%s: %w", file, err)
		}
		if crd.Kind == "CustomResourceDefinition" {
			crds = append(crds, crd)
		}
	}
}

func kindsOf(folders []kinds.Folder) []*render.Kind {
	ks, _ := kinds.Split(folders)
	return ks
}

// folderOf is a kind's folder name under templates/.
func folderOf(k *render.Kind) string { return strings.ToLower(k.GroupVersionKind().Kind) }

// placeError names a render error's template by its path in the repository,
// templates/<kind>/<file>.
func placeError(err error, folder string) error {
	var re *render.Error
	if !errors.As(err, &re) || re.File == "" || strings.HasPrefix(re.File, "(") { // "(all templates)"
		return err
	}
	placed := *re
	placed.File = path.Join("templates", folder, re.File)
	return &placed
}

// renderPlanChecked renders cr with the live objects a graph kind reads,
// validating every object with v when v is set. A type v has no schema for
// is reported on warn once and not checked.
func renderPlanChecked(cr resource, v *renderschema.Validator, warn io.Writer, in render.GraphInput) (*render.Plan, error) {
	if v == nil {
		return cr.kind.RenderGraph(cr.obj, in)
	}
	return cr.kind.RenderGraphValidated(cr.obj, in, &lenient{v: v, warn: warn, warned: map[schema.GroupVersionKind]bool{}})
}

// lenient validates and defaults what it has a schema for and warns about
// the rest.
type lenient struct {
	v      *renderschema.Validator
	warn   io.Writer
	warned map[schema.GroupVersionKind]bool
}

// Default defaults a custom resource with its CRD, or warns once that its
// kind's CRD is missing.
func (l *lenient) Default(o *unstructured.Unstructured) error {
	err := l.v.Default(o)
	if errors.Is(err, renderschema.ErrNoSchema) {
		if gvk := o.GroupVersionKind(); !l.warned[gvk] {
			l.warned[gvk] = true
			_, _ = fmt.Fprintf(l.warn, "Warning: %s is not defaulted: no CRD for %s (give it with --crds)\n", o.GetKind(), gvk)
		}
		return nil
	}
	return err
}

func (l *lenient) Validate(o *unstructured.Unstructured) error {
	err := l.v.Validate(o)
	if errors.Is(err, renderschema.ErrNoSchema) {
		if gvk := o.GroupVersionKind(); !l.warned[gvk] {
			l.warned[gvk] = true
			_, _ = fmt.Fprintf(l.warn, "Warning: %s is not checked: no schema for %s (give its CRD with --crds)\n", o.GetKind(), gvk)
		}
		return nil
	}
	return err
}

func newLintCommand(project *operator) *cobra.Command {
	src := templateSource{project: project}
	var samples []string
	var server bool
	var released string
	cmd := &cobra.Command{
		Use:   "lint",
		Short: "Check every kind's templates, offline: each test case and sample renders, and every object is valid",
		Long: `lint renders the input of every template test (templates/<kind>/tests/*/input.yaml)
and every custom resource in the files given with -f, and checks every object
against its type's schema: unknown fields, wrong types, missing required
fields, invalid names and labels. Each problem is printed as
templates/<kind>/<file>[:line]: <object>: <field>: <problem>, and the
command exits 2 when there is one. A type with no schema (a custom resource
type whose CRD --crds does not give) is a problem too.

Custom resources (samples and test inputs) are defaulted by their kind's CRD
first, as the API server stores them, and samples are checked against it.
CRDs come from --crds, by default config/crd/bases and config/crd/external
(the CRDs of third-party types the templates write) in the working
directory; samples from -f, by default config/samples.

With the CRDs of the last release (--released, by default
config/crd/released), lint also refuses a change that breaks a released
client or stored resource (unless _kind.yaml declares it: breaking), and
a field of the version kubectl preferred at the release that a new
preferred version lacks: kubectl patch <kind> of it would be dropped
without an error (unless declared: droppedByPreferred).

--server also dry-runs every sample, and every object it renders, against
the cluster of the current kubeconfig context (server-side apply, dryRun=All,
fieldValidation=Strict; nothing is stored): what only the API server knows,
such as CEL rules, admission policies and webhooks, is reported too.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			folders, v, err := src.load()
			if err != nil {
				return &exitError{code: 2, err: err}
			}
			if samples == nil {
				samples = defaultSamples()
			}
			stdin, err := io.ReadAll(cmd.InOrStdin())
			if err != nil {
				return err
			}
			if released == "" {
				if _, err := os.Stat(defaultReleased); err == nil {
					released = defaultReleased
				}
			}
			problems, checked, err := lint(bytes.NewReader(stdin), folders, v, samples, src.crdPaths(), released)
			if err != nil {
				return &exitError{code: 2, err: err}
			}
			if server {
				more, err := lintOnServer(cmd.Context(), project, bytes.NewReader(stdin), folders, v, samples)
				if err != nil {
					return &exitError{code: 2, err: err}
				}
				problems = append(problems, more...)
			}
			for _, p := range problems {
				_, _ = fmt.Fprintln(cmd.OutOrStdout(), p)
			}
			if len(problems) > 0 {
				return &exitError{code: 2, err: fmt.Errorf("%d of %d renders have problems", len(problems), checked)}
			}
			_, _ = fmt.Fprintf(cmd.OutOrStdout(), "%d renders of %d kinds and decorators: every object valid\n", checked, len(folders))
			return nil
		},
	}
	src.bindFlags(cmd)
	cmd.Flags().StringSliceVarP(&samples, "filename", "f", nil, "Files of custom resources, or folders of them, to render too (default: config/samples, when in the working directory).")
	cmd.Flags().StringVar(&released, "released", "", "Folder of the kinds' CRDs as last released, to refuse a change that breaks them (default: config/crd/released, when in the working directory; make release-crds writes it).")
	cmd.Flags().BoolVar(&server, "server", false, "Dry-run every sample and every object it renders against the cluster of the current kubeconfig context.")
	project.bindKubeconfig(cmd.Flags())
	return cmd
}

// lint renders every case's input and every sample with v, and returns one
// line per failed render and how many renders it checked.
func lint(stdin io.Reader, folders []kinds.Folder, v *renderschema.Validator, samples, crdPaths []string, released string) ([]string, int, error) {
	var problems []string
	checked := 0
	for _, f := range folders {
		failed, rendered, err := f.RenderCases(v)
		if err != nil {
			return nil, 0, fmt.Errorf("templates/%s: %w", f.Name, err)
		}
		checked += rendered
		for _, out := range failed {
			problems = append(problems, fmt.Sprintf("templates/%s/tests/%s: %v", f.Name, out.Case, placeError(out.Err, f.Name)))
		}
		if f.Kind != nil && f.Kind.Conversion().Converts() {
			problems = append(problems, uncovered(f, v)...)
		}
	}
	more, err := againstRelease(folders, crdPaths, released)
	if err != nil {
		return nil, 0, err
	}
	problems = append(problems, more...)
	byKind := kindsOf(folders)
	files, err := sampleFiles(samples)
	if err != nil {
		return nil, 0, err
	}
	for _, file := range files {
		crs, err := readResourcesOf(file, stdin, "default", byKind, v)
		if err != nil {
			return nil, 0, err
		}
		for _, cr := range crs {
			checked++
			if err := validateResource(cr, v); err != nil {
				problems = append(problems, fmt.Sprintf("%s: %v", file, err))
				continue
			}
			if _, err := cr.kind.RenderValidated(cr.obj, v); err != nil {
				problems = append(problems, fmt.Sprintf("%s: %s %s: %v", file, cr.kind.GroupVersionKind().Kind, cr.obj.GetName(), placeError(err, folderOf(cr.kind))))
			}
		}
	}
	return problems, checked, nil
}

// defaultReleased is where a project keeps its kinds' CRDs as last released.
const defaultReleased = "config/crd/released"

// againstRelease compares each kind's CRD (in crdPaths) with its released
// one (in the folder released; none: nothing to compare): what breaks the
// release, and what a new preferred version drops.
func againstRelease(folders []kinds.Folder, crdPaths []string, released string) ([]string, error) {
	if released == "" {
		return nil, nil
	}
	was, err := readCRDs([]string{released})
	if err != nil {
		return nil, fmt.Errorf("--released: %w", err)
	}
	now, err := readCRDs(crdPaths)
	if err != nil {
		return nil, err
	}
	problems := breaking(folders, now, was, crdPaths, released)
	return append(problems, renamedInPreferred(folders, now, was)...), nil
}

// findCRD is gk's CRD among crds, nil when there is none.
func findCRD(crds []*apiextensionsv1.CustomResourceDefinition, gk schema.GroupKind) *apiextensionsv1.CustomResourceDefinition {
	for _, c := range crds {
		if c.Spec.Group == gk.Group && c.Spec.Names.Kind == gk.Kind {
			return c
		}
	}
	return nil
}

// breaking reports every change of a kind's CRD (in now, read from
// crdPaths) that breaks its released one (in was, from the folder
// released) and that the kind does not declare (_kind.yaml breaking).
func breaking(folders []kinds.Folder, now, was []*apiextensionsv1.CustomResourceDefinition, crdPaths []string, released string) []string {
	var problems []string
	for _, f := range folders {
		if f.Kind == nil {
			continue
		}
		gk := f.Kind.GroupVersionKind().GroupKind()
		r, c := findCRD(was, gk), findCRD(now, gk)
		if r == nil {
			continue // a new kind
		}
		if c == nil {
			problems = append(problems, fmt.Sprintf("templates/%s: %s has a released CRD (%s) but none in %s: give its CRD to compare", f.Name, gk.Kind, released, strings.Join(crdPaths, ",")))
			continue
		}
		for _, b := range conversion.Breaks(r, c, f.Kind.Conversion().Versions(), f.Kind.Declaration().Breaking) {
			what := b.Path
			if what == "" {
				what = "*"
			}
			field := b.Version
			if b.Path != "" {
				field += " " + b.Path
			}
			problems = append(problems, fmt.Sprintf("templates/%s: %s %s: %s, against the release (%s): keep it compatible, or declare the change in _kind.yaml (breaking: {%s: [%s]})", f.Name, gk.Kind, field, b.What, released, b.Version, what))
		}
	}
	return problems
}

// renamedInPreferred reports, for each kind whose preferred version (the
// highest served one in Kubernetes' version order, which kubectl resolves
// its name to) is not the one it was at the release (in released; none:
// no client has a habit yet), every field of the released preferred
// version that the new one has not, and that the kind does not declare
// (_kind.yaml droppedByPreferred, by the released version). kubectl patch
// <kind> and every client that names no version and asks for no strict
// validation write the new preferred version: the API server drops the
// old field without an error, and the command changes nothing.
func renamedInPreferred(folders []kinds.Folder, now, released []*apiextensionsv1.CustomResourceDefinition) []string {
	var problems []string
	for _, f := range folders {
		if f.Kind == nil {
			continue
		}
		gk := f.Kind.GroupVersionKind().GroupKind()
		cur, ok := preferredVersion(now, gk)
		if !ok {
			continue
		}
		was, ok := preferredVersion(released, gk)
		if !ok || was.Name == cur.Name {
			continue
		}
		if v := crdVersion(now, gk, was.Name); v != nil && v.Served {
			was = *v // the old version as it is now: its own changes are the release check's
		}
		for _, path := range missingFields(*was.Schema.OpenAPIV3Schema, *cur.Schema.OpenAPIV3Schema, "") {
			if declared(f.Kind.Declaration().DroppedByPreferred[was.Name], path) {
				continue
			}
			problems = append(problems, fmt.Sprintf("templates/%s: kubectl now resolves %s to %s, its preferred version, which has no %s (%s had it): `kubectl patch %s` of %s, and any client that names no version, is dropped without an error (\"patched (no change)\"); keep the field's name in %s, or declare it in _kind.yaml (droppedByPreferred: {%s: [%s]}) and tell your users (docs/evolve-api.md#rename-a-field-safely)",
				f.Name, strings.ToLower(gk.Kind), cur.Name, path, was.Name, strings.ToLower(gk.Kind), path, cur.Name, was.Name, path))
		}
	}
	return problems
}

// preferredVersion is the served version of gk's CRD among crds that
// kubectl prefers: the highest in Kubernetes' version order.
func preferredVersion(crds []*apiextensionsv1.CustomResourceDefinition, gk schema.GroupKind) (apiextensionsv1.CustomResourceDefinitionVersion, bool) {
	var best apiextensionsv1.CustomResourceDefinitionVersion
	found := false
	c := findCRD(crds, gk)
	if c == nil {
		return best, false
	}
	for _, v := range c.Spec.Versions {
		if !v.Served || v.Schema == nil || v.Schema.OpenAPIV3Schema == nil {
			continue
		}
		if !found || version.CompareKubeAwareVersionStrings(v.Name, best.Name) > 0 {
			best, found = v, true
		}
	}
	return best, found
}

// crdVersion is gk's version name in crds, nil when there is none.
func crdVersion(crds []*apiextensionsv1.CustomResourceDefinition, gk schema.GroupKind, name string) *apiextensionsv1.CustomResourceDefinitionVersion {
	c := findCRD(crds, gk)
	if c == nil {
		return nil
	}
	for i := range c.Spec.Versions {
		if c.Spec.Versions[i].Name == name && c.Spec.Versions[i].Schema != nil && c.Spec.Versions[i].Schema.OpenAPIV3Schema != nil {
			return &c.Spec.Versions[i]
		}
	}
	return nil
}

// missingFields are the properties of was, by path, that now has not and
// does not keep as unknown fields, outermost first; metadata and status
// are not a client's to write.
func missingFields(was, now apiextensionsv1.JSONSchemaProps, path string) []string {
	if now.XPreserveUnknownFields != nil && *now.XPreserveUnknownFields {
		return nil
	}
	var out []string
	for _, name := range slices.Sorted(maps.Keys(was.Properties)) {
		p := name
		if path != "" {
			p = path + "." + name
		} else if name == "metadata" || name == "status" || name == "apiVersion" || name == "kind" {
			continue
		}
		child, ok := now.Properties[name]
		if !ok {
			out = append(out, p)
			continue
		}
		out = append(out, missingFields(was.Properties[name], child, p)...)
	}
	if was.Items != nil && was.Items.Schema != nil && now.Items != nil && now.Items.Schema != nil {
		out = append(out, missingFields(*was.Items.Schema, *now.Items.Schema, path+"[]")...)
	}
	if was.AdditionalProperties != nil && was.AdditionalProperties.Schema != nil && now.AdditionalProperties != nil && now.AdditionalProperties.Schema != nil {
		out = append(out, missingFields(*was.AdditionalProperties.Schema, *now.AdditionalProperties.Schema, path+".*")...)
	}
	return out
}

// declared: path is among paths, or under one of them ("*": all).
func declared(paths []string, path string) bool {
	return slices.ContainsFunc(paths, func(p string) bool {
		return p == "*" || p == path || strings.HasPrefix(path, p+".") || strings.HasPrefix(path, p+"[]")
	})
}

// uncovered converts, for each version of a kind with several, an object
// with every field of its schema set to each other version and back, and
// reports every field the round trip loses that the kind does not declare
// dropped: conversions fail closed.
func uncovered(f kinds.Folder, v *renderschema.Validator) []string {
	var problems []string
	k := f.Kind
	gvk := k.GroupVersionKind()
	for _, from := range k.Conversion().Versions() {
		gvk.Version = from
		objs, ok := v.Examples(gvk)
		if !ok {
			problems = append(problems, fmt.Sprintf("templates/%s: %s has no schema in the CRDs: its conversions cannot be checked", f.Name, gvk))
			continue
		}
		for _, to := range k.Conversion().Versions() {
			if to == from {
				continue
			}
			spoke := to
			if to == k.Conversion().Hub() {
				spoke = from
			}
			said := map[string]bool{}
			for _, obj := range objs {
				lost, err := k.Conversion().RoundTripLoss(obj, to, v)
				if err != nil {
					problems = append(problems, fmt.Sprintf("templates/%s: converting a %s %s with every field set to %s and back: %v", f.Name, from, gvk.Kind, to, err))
					break
				}
				for _, field := range lost {
					if !said[field] {
						said[field] = true
						problems = append(problems, fmt.Sprintf("templates/%s: %s of %s is lost converting to %s and back: convert it (_from-%s.yaml, _to-%s.yaml), or declare it dropped in _kind.yaml (conversion: {%s: {dropped: [%s]}})", f.Name, field, from, to, spoke, spoke, spoke, field))
					}
				}
			}
		}
	}
	return problems
}

// validateResource checks a custom resource against its CRD, defaulted, as
// the API server would before storing it.
func validateResource(cr resource, v *renderschema.Validator) error {
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal(cr.doc, &u.Object); err != nil {
		return err
	}
	u.SetNamespace(cr.obj.GetNamespace())
	if err := v.Default(u); err != nil {
		return err
	}
	return v.Validate(u)
}

// samplesDir is where a project keeps its custom resources' samples.
const samplesDir = "config/samples"

// defaultSamples is config/samples when the working directory has it.
func defaultSamples() []string {
	if info, err := os.Stat(samplesDir); err == nil && info.IsDir() {
		return []string{samplesDir}
	}
	return nil
}

// sampleFiles are the files given and the samples in the folders given:
// every *.yaml file under them that holds Kubernetes objects, but
// kustomization.yaml (a Helm values file holds none).
func sampleFiles(paths []string) ([]string, error) {
	var files []string
	for _, p := range paths {
		info, err := os.Stat(p)
		if p == "-" || err == nil && !info.IsDir() {
			files = append(files, p)
			continue
		}
		if err != nil {
			return nil, err
		}
		err = filepath.WalkDir(p, func(file string, e fs.DirEntry, err error) error {
			if err != nil || e.IsDir() || filepath.Ext(file) != ".yaml" || e.Name() == "kustomization.yaml" {
				return err
			}
			objects, err := holdsObjects(file)
			if objects {
				files = append(files, file)
			}
			return err
		})
		if err != nil {
			return nil, err
		}
	}
	return files, nil
}

// holdsObjects reports whether a document of file has an apiVersion and a
// kind.
func holdsObjects(file string) (bool, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return false, err
	}
	reader := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	for {
		doc, err := reader.Read()
		if errors.Is(err, io.EOF) {
			return false, nil
		}
		if err != nil {
			return false, fmt.Errorf("%s: %w", file, err)
		}
		probe := &unstructured.Unstructured{}
		if err := yaml.Unmarshal(doc, &probe.Object); err != nil {
			return false, fmt.Errorf("%s: %w", file, err)
		}
		if probe.GetAPIVersion() != "" && probe.GetKind() != "" {
			return true, nil
		}
	}
}

func newTestCommand(project *operator) *cobra.Command {
	src := templateSource{project: project}
	var update bool
	cmd := &cobra.Command{
		Use:   "test [FOLDER...]",
		Short: "Run the kinds' template tests, offline",
		Long: `test runs the template tests each kind's folder carries
(templates/<kind>/tests/<case>/): it renders input.yaml, checks every object
against its type's schema, and compares the output with expected.yaml (in
full), fragments.yaml (the fields given) or error.txt (a render that must
fail). Give folder names (myweb, namespace-defaults) to run only theirs.

--update rewrites a case's expected.yaml (or its error.txt) from the output,
and writes expected.yaml for a case that has none yet; it needs --templates,
the folder to write into. A render that fails where the case expects
objects (or succeeds where it expects an error) is reported, never recorded.`,
		RunE: func(cmd *cobra.Command, only []string) error {
			if update && src.templates == "" {
				return &exitError{code: 2, err: errors.New("--update writes into the folder --templates names: give it (e.g. --templates templates)")}
			}
			folders, v, err := src.load()
			if err != nil {
				return &exitError{code: 2, err: err}
			}
			failed, ran, err := runTests(cmd.OutOrStdout(), folders, v, only, update, src.templates)
			if err != nil {
				return &exitError{code: 2, err: err}
			}
			if failed > 0 {
				return &exitError{code: 1, err: fmt.Errorf("%d of %d template tests failed", failed, ran)}
			}
			_, _ = fmt.Fprintf(cmd.OutOrStdout(), "ok: %d template tests\n", ran)
			return nil
		},
	}
	src.bindFlags(cmd)
	cmd.Flags().BoolVar(&update, "update", false, "Rewrite expected.yaml (or error.txt) from the output.")
	return cmd
}

// runTests runs every case of the folders named in only (all when empty),
// printing one line each, and returns how many failed and ran.
func runTests(w io.Writer, folders []kinds.Folder, v render.Validator, only []string, update bool, dir string) (failed, ran int, err error) {
	for _, name := range only {
		if !slices.ContainsFunc(folders, func(f kinds.Folder) bool { return f.Name == name }) {
			return 0, 0, fmt.Errorf("no kind or decorator folder %q", name)
		}
	}
	for _, f := range folders {
		if len(only) > 0 && !slices.Contains(only, f.Name) {
			continue
		}
		cases, err := kindtest.Cases(f.FS)
		if err != nil {
			return 0, 0, fmt.Errorf("templates/%s: %w", f.Name, err)
		}
		for _, c := range cases {
			ran++
			out := f.Run(c, v)
			if update && out.Updatable(c) && !bytes.Equal(out.Got, c.Files[out.Golden]) {
				if err := os.WriteFile(filepath.Join(dir, f.Name, kindtest.Folder, c.Name, out.Golden), out.Got, 0o644); err != nil {
					return 0, 0, err
				}
				_, _ = fmt.Fprintf(w, "updated %s/%s/%s\n", f.Name, c.Name, out.Golden)
				continue
			}
			if out.Err != nil {
				failed++
				_, _ = fmt.Fprintf(w, "FAIL %s/%s: %v\n", f.Name, c.Name, placeError(out.Err, f.Name))
				continue
			}
			_, _ = fmt.Fprintf(w, "ok   %s/%s\n", f.Name, c.Name)
		}
	}
	return failed, ran, nil
}
