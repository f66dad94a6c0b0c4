package conversion

import (
	"context"
	"sync"
	"time"

	"github.com/go-logr/logr"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stencil-operator/stencil/render"
	rschema "github.com/stencil-operator/stencil/render/schema"
)

// readSchemasEvery is how long the schemas read from the CRDs are used
// before they are read again (a CRD's upgrade changes them).
const readSchemasEvery = time.Minute

// Schemas are the schemas of the kinds' CRDs at each of their versions,
// read from the API server: a conversion prunes what the target version's
// schema would, and restores kept fields only within it.
type Schemas struct {
	Client client.Client
	// Names are the CRDs'.
	Names []string
	Log   logr.Logger

	mu      sync.Mutex
	read    time.Time
	byKind  map[schema.GroupKind]render.VersionSchema
	storage map[schema.GroupKind]string
}

// For returns the schemas of the kind gk, nil when its CRD could not be
// read (the conversion then neither prunes nor checks, as before).
func (s *Schemas) For(gk schema.GroupKind) render.VersionSchema {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.readAgain()
	return s.byKind[gk]
}

// Storage returns the storage version of the kind gk, "" when its CRD
// could not be read.
func (s *Schemas) Storage(gk schema.GroupKind) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.readAgain()
	return s.storage[gk]
}

// readAgain reads the CRDs when what was read is older than
// readSchemasEvery.
func (s *Schemas) readAgain() {
	if time.Since(s.read) > readSchemasEvery {
		s.readAll()
		s.read = time.Now()
	}
}

// readAll reads every CRD of Names; one that cannot be read keeps what was
// read of it before, with a log line.
func (s *Schemas) readAll() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if s.byKind == nil {
		s.byKind, s.storage = map[schema.GroupKind]render.VersionSchema{}, map[schema.GroupKind]string{}
	}
	for _, name := range s.Names {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := s.Client.Get(ctx, types.NamespacedName{Name: name}, crd); err != nil {
			s.Log.Error(err, "Reading a CRD's schemas for conversions; the ones read before, if any, are kept", "crd", name)
			continue
		}
		gk := schema.GroupKind{Group: crd.Spec.Group, Kind: crd.Spec.Names.Kind}
		s.storage[gk] = storageVersion(crd)
		v, err := rschema.New(crd)
		if err != nil {
			s.Log.Error(err, "A CRD's schemas do not load; its conversions neither prune nor check", "crd", name)
			continue
		}
		s.byKind[gk] = v
	}
}
