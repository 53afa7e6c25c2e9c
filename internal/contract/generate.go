package contract

//go:generate go run ../../cmd/engram contract -root ../..

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
)

// The files the contract is written to, relative to the repository root.
const (
	AsyncAPIFile   = "api/asyncapi.yaml"
	VectorsFile    = "api/vectors.json"
	TypeScriptFile = "clients/typescript/src/contract.ts"
)

// Files generates every file of the contract, by path relative to the
// repository root.
func Files() (map[string][]byte, error) {
	doc, err := Document()
	if err != nil {
		return nil, err
	}
	vec, err := VectorsJSON()
	if err != nil {
		return nil, err
	}
	ts, err := TypeScript()
	if err != nil {
		return nil, err
	}
	return map[string][]byte{AsyncAPIFile: doc, VectorsFile: vec, TypeScriptFile: ts}, nil
}

// Write generates the files under root and reports which changed.
func Write(root string) (changed []string, err error) {
	files, err := Files()
	if err != nil {
		return nil, err
	}
	for _, rel := range []string{AsyncAPIFile, VectorsFile, TypeScriptFile} {
		path := filepath.Join(root, filepath.FromSlash(rel))
		old, _ := os.ReadFile(path)
		if bytes.Equal(old, files[rel]) {
			continue
		}
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return changed, err
		}
		if err := os.WriteFile(path, files[rel], 0o644); err != nil {
			return changed, fmt.Errorf("contract: %w", err)
		}
		changed = append(changed, rel)
	}
	return changed, nil
}

// Check reports the files under root that differ from what Files
// generates.
func Check(root string) (stale []string, err error) {
	files, err := Files()
	if err != nil {
		return nil, err
	}
	for _, rel := range []string{AsyncAPIFile, VectorsFile, TypeScriptFile} {
		old, _ := os.ReadFile(filepath.Join(root, filepath.FromSlash(rel)))
		if !bytes.Equal(old, files[rel]) {
			stale = append(stale, rel)
		}
	}
	return stale, nil
}
