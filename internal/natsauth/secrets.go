package natsauth

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// CredentialsFile is the file of the role passwords in the data dir of
// `engram serve` (mode 0600).
const CredentialsFile = "nats-credentials.json"

// StoreKeyFile is the JetStream file store encryption key in the data dir
// (mode 0600).
const StoreKeyFile = "nats-store.key"

// Credentials are the passwords of the role users of a data dir's
// embedded server.
type Credentials struct {
	// Users maps a role (Roles) to its password.
	Users map[string]string `json:"users"`
}

// CredentialsPath is the credentials file of dataDir.
func CredentialsPath(dataDir string) string { return filepath.Join(dataDir, CredentialsFile) }

// LoadCredentials reads dataDir's credentials file; the error wraps
// fs.ErrNotExist when there is none.
func LoadCredentials(dataDir string) (Credentials, error) {
	var c Credentials
	path := CredentialsPath(dataDir)
	data, err := readPrivate(path)
	if err != nil {
		return c, fmt.Errorf("natsauth: credentials: %w", err)
	}
	if err := json.Unmarshal(data, &c); err != nil {
		return c, fmt.Errorf("natsauth: credentials %s: %w", path, err)
	}
	for _, r := range Roles() {
		if c.Users[r] == "" {
			return c, fmt.Errorf("natsauth: credentials %s: no password for %s (delete the file to generate new ones)", path, r)
		}
	}
	return c, nil
}

// EnsureCredentials loads dataDir's credentials, generating and writing
// them (0600; the data dir is created 0700) on first use. created says
// whether they were generated now.
func EnsureCredentials(dataDir string) (c Credentials, created bool, err error) {
	c, err = LoadCredentials(dataDir)
	if err == nil || !errors.Is(err, fs.ErrNotExist) {
		return c, false, err
	}
	if err := EnsurePrivateDir(dataDir); err != nil {
		return c, false, err
	}
	c = Credentials{Users: map[string]string{}}
	for _, r := range Roles() {
		c.Users[r] = randomSecret(24)
	}
	data, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return c, false, err
	}
	if err := writeNew(CredentialsPath(dataDir), append(data, '\n')); err != nil {
		return c, false, fmt.Errorf("natsauth: credentials: %w", err)
	}
	return c, true, nil
}

// EnsureStoreKey returns the JetStream store key of dataDir's key file,
// generating it (0600) on first use.
func EnsureStoreKey(dataDir string) (key string, created bool, err error) {
	path := filepath.Join(dataDir, StoreKeyFile)
	if err := TightenFile(path); err != nil {
		return "", false, fmt.Errorf("natsauth: store key: %w", err)
	}
	key, err = ReadKeyFile(path)
	if err == nil || !errors.Is(err, fs.ErrNotExist) {
		return key, false, err
	}
	if err := EnsurePrivateDir(dataDir); err != nil {
		return "", false, err
	}
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	key = hex.EncodeToString(b)
	if err := writeNew(path, []byte(key+"\n")); err != nil {
		return "", false, fmt.Errorf("natsauth: store key: %w", err)
	}
	return key, true, nil
}

// ReadKeyFile reads a store key file: its content without surrounding
// white space, at least 16 characters.
func ReadKeyFile(path string) (string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("natsauth: store key: %w", err)
	}
	key := string(trimSpace(data))
	if len(key) < 16 {
		return "", fmt.Errorf("natsauth: store key %s: shorter than 16 characters", path)
	}
	return key, nil
}

// EnsurePrivateDir creates dir with mode 0700, or tightens an existing one
// to 0700 (it holds credentials, the store key and the memory store).
func EnsurePrivateDir(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("natsauth: data dir: %w", err)
	}
	st, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("natsauth: data dir: %w", err)
	}
	if st.Mode().Perm()&0o077 != 0 {
		if err := os.Chmod(dir, 0o700); err != nil {
			return fmt.Errorf("natsauth: data dir: %w", err)
		}
	}
	return nil
}

// TightenFile clears the group and other permission bits of path if it
// exists.
func TightenFile(path string) error {
	st, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if st.Mode().Perm()&0o077 != 0 {
		return os.Chmod(path, st.Mode().Perm()&^0o077)
	}
	return nil
}

// readPrivate reads path, first taking group and other access away from
// it (a file of an older version, or loosened by hand).
func readPrivate(path string) ([]byte, error) {
	if err := TightenFile(path); err != nil {
		return nil, err
	}
	return os.ReadFile(path)
}

func writeNew(path string, data []byte) error {
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		_ = os.Remove(tmp)
	}
	return err
}

func randomSecret(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // never fails (crypto/rand)
	return base64.RawURLEncoding.EncodeToString(b)
}

func trimSpace(b []byte) []byte {
	for len(b) > 0 && (b[0] == ' ' || b[0] == '\n' || b[0] == '\r' || b[0] == '\t') {
		b = b[1:]
	}
	for len(b) > 0 && (b[len(b)-1] == ' ' || b[len(b)-1] == '\n' || b[len(b)-1] == '\r' || b[len(b)-1] == '\t') {
		b = b[:len(b)-1]
	}
	return b
}

// KeyIDFile, in the JetStream store folder, records which key encrypts the
// store (a hash of it, not the key).
const KeyIDFile = "engram-store-key.id"

// ErrWrongStoreKey is returned by CheckStoreKey when the store was
// encrypted with another key.
var ErrWrongStoreKey = errors.New("natsauth: the NATS store was encrypted with another key")

// CheckStoreKey makes sure key is the key storeDir was encrypted with: a
// store first opened with a key records the key's id; a later start with
// another key is refused (nats-server would fail to restore every stream,
// and the streams would be created anew, empty). A store without the
// record (new, or plaintext of an older version, which nats-server
// converts) gets it.
func CheckStoreKey(storeDir, key string) error {
	sum := sha256.Sum256([]byte("engram store key id\x00" + key))
	id := hex.EncodeToString(sum[:8])
	path := filepath.Join(storeDir, KeyIDFile)
	data, err := os.ReadFile(path)
	switch {
	case err == nil:
		if got := string(trimSpace(data)); got != id {
			return fmt.Errorf("%w (key id %s, the configured key's is %s): give the key it was encrypted with (ENGRAM_NATS_STORE_KEY_FILE, default <data>/%s)",
				ErrWrongStoreKey, got, id, StoreKeyFile)
		}
		return nil
	case errors.Is(err, fs.ErrNotExist):
		if err := os.MkdirAll(storeDir, 0o700); err != nil {
			return fmt.Errorf("natsauth: store key id: %w", err)
		}
		if err := writeNew(path, []byte(id+"\n")); err != nil {
			return fmt.Errorf("natsauth: store key id: %w", err)
		}
		return nil
	}
	return fmt.Errorf("natsauth: store key id: %w", err)
}
