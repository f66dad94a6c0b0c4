// Package conversion serves the conversion webhook of the CRDs of kinds
// with several versions: the API server sends a ConversionReview, and each
// object is converted by its kind's conversion templates
// (render.Conversion.Convert).
//
// Flow: the operator, before its manager starts, makes or reads the
// serving certificate ([Certs]) and writes the CA bundle (and, run
// locally, the URL) into those CRDs ([Inject]); the manager's webhook
// server then answers /convert with a [Handler] on every replica, leader
// or not. A background check ([Certs.Rotate]) renews the certificate
// before it expires.
//
// Invariants:
//   - a conversion that fails answers the API server with a Failure naming
//     the kind, the object, both versions and the template; it never
//     panics the operator;
//   - the CA bundle a CRD holds always verifies the certificate every
//     replica serves: a new CA is written to the CRDs, beside the old one,
//     before any replica serves a certificate it signed;
//   - stencil writes only spec.conversion of its own kinds' CRDs.
package conversion
