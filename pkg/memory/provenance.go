package memory

// Provenance says where a memory comes from and how far to trust it, in
// the words the memory block shows beside each line: its subkind; "any
// project" for a global memory, "learned in <name>" (the display name from
// names, neutralised) or "another project" for a memory of another project
// than project; "code changed since" when it is stale; "low confidence"
// under 0.5. The injector's block and the `memory` tool describe a memory
// alike with it.
func Provenance(n *Node, project string, names map[string]string) []string {
	p := []string{string(n.Subkind)}
	switch {
	case n.ProjectID == "":
		p = append(p, "any project")
	case n.ProjectID != project:
		if name := names[n.ProjectID]; name != "" {
			p = append(p, "learned in "+Neutralise(name))
		} else {
			p = append(p, "another project")
		}
	}
	if n.Stale() {
		p = append(p, "code changed since")
	}
	if n.Confidence < 0.5 {
		p = append(p, "low confidence")
	}
	return p
}
