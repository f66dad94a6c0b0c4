package render

import "strings"

// NodeInputs are the inputs that the template file of a graph kind's node
// reads (nil when file is no node's or reads none): what a failure of
// that template may come from.
func (k *Kind) NodeInputs(file string) []Input {
	if k.graph == nil {
		return nil
	}
	n := k.graph.nodes[strings.TrimSuffix(file, ".yaml")]
	if n == nil {
		return nil
	}
	out := make([]Input, 0, len(n.reads))
	for _, name := range n.reads {
		out = append(out, k.graph.inputs[name].Input)
	}
	return out
}
