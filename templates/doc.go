// Package templates embeds one folder of Go templates per kind
// (templates/<kind>/*.yaml, optionally with a kustomization.yaml). Package
// render reads them as data.
package templates
