package kinds

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/stencil-operator/stencil/render"
	"github.com/stencil-operator/stencil/render/kindtest"
	renderschema "github.com/stencil-operator/stencil/render/schema"
)

// Folder is one shipped kind's or decorator's folder of templates, parsed:
// exactly one of Kind and Decorator is set.
type Folder struct {
	// Name is the folder's name under templates/.
	Name      string
	FS        fs.FS
	Kind      *render.Kind
	Decorator *render.Decorator
}

// Folders parses every registered kind's and decorator's folder: the
// built-in ones when dir is "", else those under dir (laid out as
// templates/), so that a kind author can lint and test edited templates
// without rebuilding.
func (s Set) Folders(dir string) ([]Folder, error) {
	var out []Folder
	for _, def := range s.Kinds {
		f, err := loadKind(def, dir)
		if err != nil {
			return nil, err
		}
		out = append(out, f)
	}
	for _, def := range s.Decorators {
		fsys := def.Templates
		if dir != "" {
			var err error
			if fsys, err = folderOnDisk(dir, def.Name); err != nil {
				return nil, err
			}
		}
		d, err := render.LoadDecorator(def.Name, fsys)
		if err != nil {
			return nil, err
		}
		out = append(out, Folder{Name: def.Name, FS: fsys, Decorator: d})
	}
	return out, nil
}

// loadKind parses a kind's folder: the built-in one when dir is "", else
// the one under dir.
func loadKind(def render.Definition, dir string) (Folder, error) {
	name := kindFolder(def)
	if dir != "" {
		fsys, err := folderOnDisk(dir, name)
		if err != nil {
			return Folder{}, err
		}
		def.Templates = fsys
	}
	k, err := render.Load(def)
	if err != nil {
		return Folder{}, err
	}
	return Folder{Name: name, FS: def.Templates, Kind: k}, nil
}

func folderOnDisk(dir, name string) (fs.FS, error) {
	path := filepath.Join(dir, name)
	if info, err := os.Stat(path); err != nil || !info.IsDir() {
		return nil, fmt.Errorf("templates folder %s: no folder %s (the folders of every registered kind are needed)", dir, name)
	}
	return os.DirFS(path), nil
}

// CheckRenders renders the input of every test case of every folder that
// expects a render (not an error.txt), without schema validation (the API
// server validates what is applied; `stencil lint` and `make test` validate
// offline). The operator runs it at start-up and refuses to run kinds whose
// templates cannot render their own cases.
//
// defaults, when not nil, defaults each case's input first, as the API
// server defaults a resource (DefaultsOnly of the kinds' CRDs).
func CheckRenders(folders []Folder, defaults render.Validator) error {
	var errs []error
	for _, f := range folders {
		failed, _, err := f.RenderCases(defaults)
		if err != nil {
			errs = append(errs, fmt.Errorf("templates/%s: %w", f.Name, err))
		}
		for _, c := range failed {
			errs = append(errs, fmt.Errorf("templates/%s cannot render its test case %s: %w", f.Name, c.Case, c.Err))
		}
	}
	return errors.Join(errs...)
}

// Run runs one of the folder's test cases, checking objects with v (when
// not nil).
func (f Folder) Run(c kindtest.Case, v render.Validator) kindtest.Outcome {
	if f.Kind != nil {
		return kindtest.RunKind(f.Kind, c, v)
	}
	return kindtest.RunDecorator(f.Decorator, c, v)
}

// RenderCases renders the input of every test case of f that expects a
// render (not an error.txt), checking objects with v (when not nil) but not
// comparing them with the expected output; it returns the failed ones and
// how many it rendered.
func (f Folder) RenderCases(v render.Validator) (failed []kindtest.Outcome, rendered int, err error) {
	cases, err := kindtest.Cases(f.FS)
	if err != nil {
		return nil, 0, err
	}
	for _, c := range cases {
		if c.Files[kindtest.ErrorFile] != nil {
			continue // a case that must fail, checked by stencil test
		}
		delete(c.Files, kindtest.ExpectedFile)
		delete(c.Files, kindtest.FragmentsFile)
		rendered++
		if out := f.Run(c, v); out.Err != nil {
			failed = append(failed, out)
		}
	}
	return failed, rendered, nil
}

// Split returns the folders' kinds and decorators.
func Split(folders []Folder) ([]*render.Kind, []*render.Decorator) {
	var ks []*render.Kind
	var ds []*render.Decorator
	for _, f := range folders {
		if f.Kind != nil {
			ks = append(ks, f.Kind)
		} else {
			ds = append(ds, f.Decorator)
		}
	}
	return ks, ds
}

// WithLimits is f with its kind or decorator rendering within l.
func (f Folder) WithLimits(l render.Limits) Folder {
	if f.Kind != nil {
		f.Kind = f.Kind.WithLimits(l)
	}
	if f.Decorator != nil {
		f.Decorator = f.Decorator.WithLimits(l)
	}
	return f
}

// WithKubeVersion is f with a chart kind's .Capabilities.KubeVersion v.
func (f Folder) WithKubeVersion(v render.KubeVersion) Folder {
	if f.Kind != nil && f.Kind.Chart() != nil {
		f.Kind = f.Kind.WithKubeVersion(v)
	}
	return f
}

// DefaultsOnly is a validator that only defaults: custom resources of the
// types v has a schema for, as the API server does, and the others as they
// are; it checks nothing.
func DefaultsOnly(v *renderschema.Validator) render.Validator { return defaultsOnly{v} }

type defaultsOnly struct{ v *renderschema.Validator }

func (d defaultsOnly) Default(o *unstructured.Unstructured) error {
	if err := d.v.Default(o); !errors.Is(err, renderschema.ErrNoSchema) {
		return err
	}
	return nil
}

func (defaultsOnly) Validate(*unstructured.Unstructured) error { return nil }
