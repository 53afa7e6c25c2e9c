package memory_test

import (
	"context"
	"strings"
	"testing"

	"github.com/engram-memory/engram/internal/storetest"
	"github.com/engram-memory/engram/pkg/memory"
)

func TestRedactPII(t *testing.T) {
	cases := []struct{ in, want string }{
		{"write to alice.smith@example.org today", "write to [email] today"},
		{"call +49 30 1234567 after nine", "call [phone] after nine"},
		{"US office (555) 123-4567", "US office [phone]"},
		{"Telefon: 030 1234567", "Telefon: [phone]"},
		{"телефон 8 912 345-67-89", "телефон [phone]"},
		{"IBAN DE89 3704 0044 0532 0130 00 for rent", "IBAN [iban] for rent"},
		{"GB82WEST12345698765432", "[iban]"},
		{"SSN 123-45-6789", "SSN [national id]"},
		{"DNI 12345678Z", "DNI [national id]"},
		{"NIE X1234567L", "NIE [national id]"},
		{"BSN: 111222333", "BSN: [national id]"},
		{"CPF 529.982.247-25", "CPF [national id]"},
		{"身份证 11010519491231002X", "身份证 [national id]"},
		{"NIR 1 84 12 76 451 089 46", "NIR [national id]"},
		{"NINO AB 12 34 56 C", "NINO [national id]"},
		// checks that fail: left alone
		{"IBAN DE89 3704 0044 0532 0130 01", "IBAN DE89 3704 0044 0532 0130 01"},
		{"SSN 666-12-3456 and 000-12-3456", "SSN 666-12-3456 and 000-12-3456"},
		{"DNI 12345678A", "DNI 12345678A"},
		{"CPF 529.982.247-26", "CPF 529.982.247-26"},
		{"snowflake 110105194912310021", "snowflake 110105194912310021"},
		{"NINO BG 12 34 56 C", "NINO BG 12 34 56 C"},
		// ordinary numbers and addresses that are not PII
		{"version 1.26.8, build 20261206, port 8080", "version 1.26.8, build 20261206, port 8080"},
		{"clone git@github.com:org/repo.git", "clone git@github.com:org/repo.git"},
		{"https://user@example.com/x", "https://user@example.com/x"},
		{"order 2026-12-06 12:30, ticket #4521", "order 2026-12-06 12:30, ticket #4521"},
	}
	for _, c := range cases {
		got := memory.RedactPII(c.in)
		if got != c.want {
			t.Errorf("RedactPII(%q) = %q, want %q", c.in, got, c.want)
		}
		if again := memory.RedactPII(got); again != got {
			t.Errorf("not idempotent: %q -> %q", got, again)
		}
	}
}

// PII redaction is per tenant and off by default: the tenant that asked for
// it stores no e-mail address, phone number or IBAN (node, transcript,
// summary); another tenant, and the default tenant, keep theirs.
func TestPIIRedactionPerTenant(t *testing.T) {
	if err := memory.SetPIIRedaction([]string{"acme"}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = memory.SetPIIRedaction(nil) })
	if err := memory.SetPIIRedaction([]string{"acme", strings.Repeat("x", memory.MaxTenantLen+1)}); err == nil {
		t.Error("an invalid tenant id was accepted")
	}
	if !memory.PIIRedacted("acme") || memory.PIIRedacted("") || memory.PIIRedacted("other") {
		t.Fatal("the policy was changed by a refused setting, or is wrong")
	}
	ctx := context.Background()
	st := storetest.OpenSQLite(t)
	const text = "Send invoices to billing@acme.example, call +44 20 7946 0958, pay to GB82 WEST 1234 5698 7654 32."
	pii := []string{"billing@acme.example", "7946 0958", "GB82 WEST"}
	for _, tenant := range []string{"acme", "other", ""} {
		ref := memory.SessionRef{Tenant: tenant, Project: "p", Session: "s"}
		res, err := st.Upsert(ctx, memory.Node{TenantID: tenant, Subkind: memory.Observation, Scope: memory.ScopeProject, ProjectID: "p",
			Label: "billing", Body: text, Entities: []memory.Entity{{Name: "billing@acme.example"}}, Confidence: 0.8})
		if err != nil {
			t.Fatal(err)
		}
		msgs, _, err := st.AppendTranscript(ctx, ref, "t1", []memory.Message{{Role: memory.RoleUser, Content: text}})
		if err != nil {
			t.Fatal(err)
		}
		if err := st.SaveSummary(ctx, ref, memory.Summary{Content: "## Active task\n" + text, UpTo: 1}); err != nil {
			t.Fatal(err)
		}
		sum, err := st.LatestSummary(ctx, ref)
		if err != nil {
			t.Fatal(err)
		}
		stored := res.Node.Body + "\n" + res.Node.Entities[0].Name + "\n" + msgs[0].Content + "\n" + sum.Content
		for _, p := range pii {
			if kept := strings.Contains(stored, p); kept == (tenant == "acme") {
				t.Errorf("tenant %q: %q kept=%v:\n%s", tenant, p, kept, stored)
			}
		}
	}
	// "*" is every tenant, "default" the default one.
	if err := memory.SetPIIRedaction([]string{"default"}); err != nil || !memory.PIIRedacted("") || memory.PIIRedacted("acme") {
		t.Errorf("default: %v", err)
	}
	if err := memory.SetPIIRedaction([]string{"*"}); err != nil || !memory.PIIRedacted("anyone") {
		t.Errorf("*: %v", err)
	}
}
