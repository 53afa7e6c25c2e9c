package contract

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// node turns a Go value into a YAML node: strings, numbers, booleans, nil,
// *yaml.Node, []string, []*yaml.Node, *Schema.
func node(v any) *yaml.Node {
	switch v := v.(type) {
	case *yaml.Node:
		return v
	case *Schema:
		return v.node()
	case string:
		n := &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: v}
		if strings.Contains(v, "\n") {
			n.Style = yaml.LiteralStyle
		}
		return n
	case int:
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!int", Value: strconv.Itoa(v)}
	case int64:
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!int", Value: strconv.FormatInt(v, 10)}
	case bool:
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!bool", Value: strconv.FormatBool(v)}
	case nil:
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!null", Value: "null"}
	case []string:
		s := &yaml.Node{Kind: yaml.SequenceNode}
		for _, e := range v {
			s.Content = append(s.Content, node(e))
		}
		return s
	case []*yaml.Node:
		return &yaml.Node{Kind: yaml.SequenceNode, Content: v}
	}
	panic(fmt.Sprintf("contract: no YAML for %T", v))
}

// mapping is a YAML mapping of key, value pairs in order; a nil
// *yaml.Node or *Schema value leaves its key out.
func mapping(kv ...any) *yaml.Node {
	m := &yaml.Node{Kind: yaml.MappingNode}
	for i := 0; i+1 < len(kv); i += 2 {
		switch v := kv[i+1].(type) {
		case *yaml.Node:
			if v == nil {
				continue
			}
		case *Schema:
			if v == nil {
				continue
			}
		}
		m.Content = append(m.Content, node(kv[i].(string)), node(kv[i+1]))
	}
	return m
}

// add appends a key and value to mapping m.
func add(m *yaml.Node, key string, v any) { m.Content = append(m.Content, node(key), node(v)) }

func ref(path string) *yaml.Node { return mapping("$ref", path) }

// jsonNode parses JSON (a YAML subset) into a block-style node, keeping
// the keys' order.
func jsonNode(data []byte) (*yaml.Node, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, err
	}
	n := doc.Content[0]
	var block func(*yaml.Node)
	block = func(n *yaml.Node) {
		if n.Kind == yaml.MappingNode || n.Kind == yaml.SequenceNode {
			n.Style = 0
		}
		if n.Kind == yaml.ScalarNode && n.Tag == "!!str" {
			n.Style = yaml.DoubleQuotedStyle
		}
		for _, c := range n.Content {
			block(c)
		}
	}
	block(n)
	return n, nil
}

// node is the schema as YAML.
func (s *Schema) node() *yaml.Node {
	if s.Ref != "" {
		return ref("#/components/schemas/" + s.Ref)
	}
	m := &yaml.Node{Kind: yaml.MappingNode}
	if s.Type != "" {
		add(m, "type", s.Type)
	}
	if s.Description != "" {
		add(m, "description", s.Description)
	}
	if s.Const != "" {
		add(m, "const", s.Const)
	}
	if len(s.Enum) > 0 {
		add(m, "enum", s.Enum)
	}
	if s.Format != "" {
		add(m, "format", s.Format)
	}
	if s.MinLength > 0 {
		add(m, "minLength", s.MinLength)
	}
	if s.MaxLength > 0 {
		add(m, "maxLength", s.MaxLength)
	}
	if s.Pattern != "" {
		add(m, "pattern", s.Pattern)
	}
	if s.Minimum != nil {
		add(m, "minimum", *s.Minimum)
	}
	if s.Maximum != nil {
		add(m, "maximum", *s.Maximum)
	}
	if s.MinItems > 0 {
		add(m, "minItems", s.MinItems)
	}
	if s.Items != nil {
		add(m, "items", s.Items)
	}
	if len(s.Required) > 0 {
		add(m, "required", s.Required)
	}
	if len(s.Properties) > 0 {
		props := &yaml.Node{Kind: yaml.MappingNode}
		for _, p := range s.Properties {
			add(props, p.Name, p.Schema)
		}
		add(m, "properties", props)
	}
	if s.Additional != nil {
		add(m, "additionalProperties", s.Additional)
	}
	if s.KeyMinLength > 0 {
		add(m, "propertyNames", mapping("minLength", s.KeyMinLength))
	}
	if len(s.AllOf) > 0 {
		var all []*yaml.Node
		for _, a := range s.AllOf {
			all = append(all, a.node())
		}
		add(m, "allOf", all)
	}
	if s.If != nil {
		add(m, "if", s.If)
		add(m, "then", s.Then)
	}
	if s.MaxBytes > 0 {
		add(m, "x-engram-max-bytes", s.MaxBytes)
	}
	if len(s.OpenEnum) > 0 {
		add(m, "x-engram-known-values", s.OpenEnum)
	}
	for _, e := range s.Extensions {
		add(m, e.Name, e.Value)
	}
	return m
}

// encodeYAML writes n with two-space indentation.
func encodeYAML(n *yaml.Node) ([]byte, error) {
	var b bytes.Buffer
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(n); err != nil {
		return nil, err
	}
	if err := enc.Close(); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}
