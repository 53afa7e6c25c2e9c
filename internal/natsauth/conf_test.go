package natsauth_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/engram-memory/engram/internal/natsauth"
	"github.com/engram-memory/engram/pkg/events"
)

// accountsConf is the shipped configuration, relative to this package.
var accountsConf = filepath.Join("..", "..", "deploy", "nats", "accounts.conf")

// TestAccountsConfIsGenerated keeps deploy/nats/accounts.conf equal to the
// Go permission set (ENGRAM_UPDATE_ACCOUNTS_CONF=1 rewrites it).
func TestAccountsConfIsGenerated(t *testing.T) {
	want := natsauth.AccountsConf(events.DefaultPrefix, natsauth.Tenants{})
	if os.Getenv("ENGRAM_UPDATE_ACCOUNTS_CONF") == "1" {
		if err := os.WriteFile(accountsConf, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(accountsConf)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != want {
		t.Fatalf("%s differs from natsauth.AccountsConf: run ENGRAM_UPDATE_ACCOUNTS_CONF=1 go test ./internal/natsauth", accountsConf)
	}
}
