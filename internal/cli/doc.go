// Package cli is stencil's command line: the operator (the root command) and,
// in later steps, the offline render and diff commands. It parses flags and
// wires packages together; it holds no resource logic.
package cli
