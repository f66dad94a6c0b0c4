//go:build tools

// Package tools records the commands this module builds, so `go mod tidy`
// keeps their dependencies.
package tools

import _ "github.com/kubernetes-sigs/kro/cmd/controller"
