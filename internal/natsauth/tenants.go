package natsauth

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"sort"
	"unicode"
	"unicode/utf8"

	"golang.org/x/crypto/bcrypt"

	"github.com/engram-memory/engram/pkg/events"
)

// TenantsFile holds the platform credentials of the named tenants of a
// data dir (mode 0600): for each tenant the bcrypt hash of its password,
// never the password itself, which `engram tenant add` prints once.
const TenantsFile = "nats-tenants.json"

// ErrTenantExists is returned by AddTenant for a tenant that has
// credentials already (rotate them instead).
var ErrTenantExists = errors.New("natsauth: the tenant has credentials already")

// ErrNoTenant is returned for a tenant without credentials.
var ErrNoTenant = errors.New("natsauth: no such tenant")

// Tenants are the named tenants' platform credentials.
type Tenants struct {
	// Hashes maps a tenant id to the bcrypt hash of its password.
	Hashes map[string]string `json:"tenants"`
}

// Names returns the tenant ids, sorted.
func (t Tenants) Names() []string {
	names := make([]string, 0, len(t.Hashes))
	for n := range t.Hashes {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// TenantsPath is the tenants file of dataDir.
func TenantsPath(dataDir string) string { return filepath.Join(dataDir, TenantsFile) }

// ValidateTenant checks a tenant id for credentials: not empty (the
// default tenant's platform is the platform role), at most
// events.MaxIDLen bytes of valid UTF-8 without control characters (what
// an event's tenant_id may be).
func ValidateTenant(tenant string) error {
	switch {
	case tenant == "":
		return errors.New("natsauth: tenant id is empty (the default tenant's platform uses the platform role)")
	case len(tenant) > events.MaxIDLen:
		return fmt.Errorf("natsauth: tenant id longer than %d bytes", events.MaxIDLen)
	case !utf8.ValidString(tenant):
		return errors.New("natsauth: tenant id is not valid UTF-8")
	}
	for _, r := range tenant {
		if unicode.IsControl(r) {
			return fmt.Errorf("natsauth: tenant id %q holds a control character", tenant)
		}
	}
	return nil
}

// LoadTenants reads dataDir's tenants file; none is no tenants.
func LoadTenants(dataDir string) (Tenants, error) {
	t := Tenants{Hashes: map[string]string{}}
	data, err := readPrivate(TenantsPath(dataDir))
	if errors.Is(err, fs.ErrNotExist) {
		return t, nil
	}
	if err != nil {
		return t, fmt.Errorf("natsauth: tenants: %w", err)
	}
	if err := json.Unmarshal(data, &t); err != nil {
		return t, fmt.Errorf("natsauth: tenants %s: %w", TenantsPath(dataDir), err)
	}
	if t.Hashes == nil {
		t.Hashes = map[string]string{}
	}
	for name, h := range t.Hashes {
		if err := ValidateTenant(name); err != nil {
			return t, fmt.Errorf("natsauth: tenants %s: %w", TenantsPath(dataDir), err)
		}
		if _, err := bcrypt.Cost([]byte(h)); err != nil {
			return t, fmt.Errorf("natsauth: tenants %s: tenant %q: not a bcrypt hash", TenantsPath(dataDir), name)
		}
	}
	return t, nil
}

func saveTenants(dataDir string, t Tenants) error {
	if err := EnsurePrivateDir(dataDir); err != nil {
		return err
	}
	data, err := json.MarshalIndent(t, "", "  ")
	if err != nil {
		return err
	}
	if err := writeNew(TenantsPath(dataDir), append(data, '\n')); err != nil {
		return fmt.Errorf("natsauth: tenants: %w", err)
	}
	return nil
}

// AddTenant gives tenant platform credentials in dataDir: a new random
// password, returned (to hand to the tenant's platform; it is not kept),
// and its bcrypt hash written to the tenants file. rotate replaces the
// credentials of a tenant that has some (the old password stops working
// when the server reloads them); without it such a tenant is
// ErrTenantExists.
func AddTenant(dataDir, tenant string, rotate bool) (password string, err error) {
	if err := ValidateTenant(tenant); err != nil {
		return "", err
	}
	t, err := LoadTenants(dataDir)
	if err != nil {
		return "", err
	}
	if _, ok := t.Hashes[tenant]; ok && !rotate {
		return "", fmt.Errorf("%w: %q (rotate to replace them)", ErrTenantExists, tenant)
	}
	if _, ok := t.Hashes[tenant]; !ok && rotate {
		return "", fmt.Errorf("%w: %q", ErrNoTenant, tenant)
	}
	password = randomSecret(24)
	// The password is 192 random bits: the hash's cost adds nothing
	// against guessing it, and the lowest keeps each connection's check
	// under a millisecond.
	h, err := bcrypt.GenerateFromPassword([]byte(password), bcrypt.MinCost)
	if err != nil {
		return "", fmt.Errorf("natsauth: tenant %q: %w", tenant, err)
	}
	t.Hashes[tenant] = string(h)
	return password, saveTenants(dataDir, t)
}

// RemoveTenant deletes tenant's credentials from dataDir (ErrNoTenant when
// it has none). Its memory is untouched.
func RemoveTenant(dataDir, tenant string) error {
	t, err := LoadTenants(dataDir)
	if err != nil {
		return err
	}
	if _, ok := t.Hashes[tenant]; !ok {
		return fmt.Errorf("%w: %q", ErrNoTenant, tenant)
	}
	delete(t.Hashes, tenant)
	return saveTenants(dataDir, t)
}
