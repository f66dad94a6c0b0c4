// Package handwritten is the MyWeb operator as a Go developer would write it
// by hand with controller-runtime, without stencil: the contender that `make
// bench-peers` measures stencil against to answer whether templates cost
// anything over a well-written Go controller. It is not part of the product.
//
// It reconciles the same MyWeb CRD into the same ConfigMap, Deployment and
// Service that templates/myweb renders (same names, labels, fields), sets a
// controller ownerReference on each, owns and watches them, and writes the
// same status: observedGeneration, the Ready, Reconciling and Drifted
// conditions with stencil's reasons, the inventory and completed.
//
// Two variants, as users write them:
//
//   - [VariantApply]: every reconcile server-side-applies the three objects,
//     built as typed apply configurations (k8s.io/client-go/applyconfigurations),
//     with one field manager and force, as controller-runtime recommends.
//   - [VariantGetUpdate]: the seed tutorials' way. Get each object from the
//     cache; create it when it is missing; otherwise compare the fields the
//     operator sets and update it only when one differs.
//
// Both read from the manager's cache, write the status only when it
// differs from the status in the cache (which may not hold their last
// write yet, so a MyWeb's status can be written twice with the same
// content), reconcile a MyWeb again only when its generation changes or an
// owned object changes (controller-runtime's GenerationChangedPredicate on
// MyWeb, Owns on the rest), look again a second later when the cache
// is behind their own writes (AlreadyExists, Conflict; a create refused
// for another reason whose object exists counts as AlreadyExists), and take the same worker
// count and client limits as stencil (8 workers, 500 requests per second,
// burst 1,000). Neither detects drift as stencil does: they correct it by
// writing again on every event of an owned object, and their Drifted
// condition only says the last write succeeded.
package handwritten
