// Package metricsauth guards the operator's metrics endpoint the way the
// API server's own components guard theirs: a request gets through only with
// a bearer token that the API server authenticates (a TokenReview) for a
// user it authorizes to use the request's verb on its path (a
// SubjectAccessReview of a non-resource URL, such as "get /metrics").
//
// Invariants:
//   - No token, a token the API server does not accept, or a user it does
//     not authorize: 401 or 403, and the handler behind is not called.
//   - When the API server cannot be asked, the answer is 503 and nothing is
//     remembered; a decision it gave is remembered for a short time (an
//     allow for a minute, a refusal for ten seconds), so that a scraper
//     costs it at most two requests a minute.
//   - Tokens are neither logged nor kept: the cache holds their SHA-256.
//
// It is written against client-go's typed clients, which the operator links
// anyway, rather than controller-runtime's filter, which links
// k8s.io/apiserver: 15 MB more binary and about 8 MiB more memory at run
// time, even with the endpoint unsecured (measured with make bench).
package metricsauth
