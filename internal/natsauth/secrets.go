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
	"slices"
)

// CredentialsFile is the file of the role passwords in the data dir of
// `engram serve` (mode 0600).
const CredentialsFile = "nats-credentials.json"

// StoreKeyFile is where versions before issue 31 kept the JetStream file
// store encryption key: in the data dir, beside the store. EnsureStoreKey
// moves it to the key dir (StoreKeyDir).
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
		if c.Users[r] == "" && !slices.Contains(laterRoles, r) {
			return c, fmt.Errorf("natsauth: credentials %s: no password for %s (delete the file to generate new ones)", path, r)
		}
	}
	return c, nil
}

// laterRoles were added after data dirs with a credentials file existed:
// LoadCredentials reads a file without them (their users are then absent
// from the server), and EnsureCredentials adds them to it.
var laterRoles = []string{RoleOutputs}

// EnsureCredentials loads dataDir's credentials, generating and writing
// them (0600; the data dir is created 0700) on first use. created says
// whether they were generated now.
func EnsureCredentials(dataDir string) (c Credentials, created bool, err error) {
	c, err = LoadCredentials(dataDir)
	if err == nil {
		// A file of an older version lacks the roles added since: give
		// them passwords, keeping the others.
		added := false
		for _, r := range Roles() {
			if c.Users[r] == "" {
				c.Users[r] = randomSecret(24)
				added = true
			}
		}
		if added {
			data, err := json.MarshalIndent(c, "", "  ")
			if err != nil {
				return c, false, err
			}
			if err := writeNew(CredentialsPath(dataDir), append(data, '\n')); err != nil {
				return c, false, fmt.Errorf("natsauth: credentials: %w", err)
			}
		}
		return c, false, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
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

// StoreKeyDirName is the folder of the store keys in the user's
// configuration dir (StoreKeyDir).
const StoreKeyDirName = "nats-store-keys"

// StoreKeyDir is where `engram serve` keeps the JetStream store keys by
// default: <user config dir>/engram/nats-store-keys ($XDG_CONFIG_HOME or
// ~/.config on Linux), outside the data dir, so that a copy of the data
// dir (a backup, a volume snapshot, a stolen disk image of the data
// volume) is not readable with what it holds.
func StoreKeyDir() (string, error) {
	d, err := os.UserConfigDir()
	if err != nil {
		return "", fmt.Errorf("natsauth: store key dir: %w (set XDG_CONFIG_HOME or HOME, or give the key with ENGRAM_NATS_STORE_KEY_FILE)", err)
	}
	return filepath.Join(d, "engram", StoreKeyDirName), nil
}

// StoreKeyID is the id of a store key: a hash of it, which CheckStoreKey
// records in the store, and the name of its file in the key dir.
func StoreKeyID(key string) string {
	sum := sha256.Sum256([]byte("engram store key id\x00" + key))
	return hex.EncodeToString(sum[:8])
}

// StoreKey is the key EnsureStoreKey found or made, and what it did.
type StoreKey struct {
	Key  string
	Path string // its file
	// Created: a new key (a new store); Moved: the key of an older version
	// was moved from the data dir (MovedFrom) to Path.
	Created, Moved bool
	MovedFrom      string
}

// EnsureStoreKey returns the JetStream store key of the store in storeDir,
// kept in keyDir ("" is StoreKeyDir) as <key id>.key (0600, the dir 0700):
// the key whose id the store records; for a store without a record, a new
// key. A key of an older version in the data dir (dataDir/StoreKeyFile,
// beside the store it encrypts) is moved to keyDir first: written there and
// synced, then removed from the data dir. A store whose key is nowhere is
// an error naming its id (give it with ENGRAM_NATS_STORE_KEY_FILE).
func EnsureStoreKey(dataDir, storeDir, keyDir string) (StoreKey, error) {
	var k StoreKey
	if keyDir == "" {
		d, err := StoreKeyDir()
		if err != nil {
			return k, err
		}
		keyDir = d
	}
	recorded := ""
	if data, err := os.ReadFile(filepath.Join(storeDir, KeyIDFile)); err == nil {
		recorded = string(trimSpace(data))
	} else if !errors.Is(err, fs.ErrNotExist) {
		return k, fmt.Errorf("natsauth: store key id: %w", err)
	}
	legacy := filepath.Join(dataDir, StoreKeyFile)
	if recorded != "" {
		k.Path = filepath.Join(keyDir, recorded+".key")
		if err := TightenFile(k.Path); err != nil {
			return k, fmt.Errorf("natsauth: store key: %w", err)
		}
		key, err := ReadKeyFile(k.Path)
		if err == nil {
			k.Key = key
			return k, nil
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return k, err
		}
	}
	// The key of an older version, beside the store: move it out.
	if key, err := ReadKeyFile(legacy); err == nil {
		id := StoreKeyID(key)
		if recorded != "" && id != recorded {
			return k, fmt.Errorf("%w (key id %s, the key in %s is %s): give the key it was encrypted with (ENGRAM_NATS_STORE_KEY_FILE)",
				ErrWrongStoreKey, recorded, legacy, id)
		}
		k = StoreKey{Key: key, Path: filepath.Join(keyDir, id+".key"), Moved: true, MovedFrom: legacy}
		if err := writeKey(keyDir, k.Path, key); err != nil {
			return k, err
		}
		if err := os.Remove(legacy); err != nil {
			return k, fmt.Errorf("natsauth: store key moved to %s but not removed from the data dir: %w", k.Path, err)
		}
		return k, nil
	} else if !errors.Is(err, fs.ErrNotExist) {
		return k, err
	}
	if recorded != "" {
		return k, fmt.Errorf("%w: the store %s was encrypted with the key of id %s, which is not at %s (nor in the data dir): "+
			"give it with ENGRAM_NATS_STORE_KEY_FILE", ErrStoreKeyMissing, storeDir, recorded, k.Path)
	}
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	key := hex.EncodeToString(b)
	k = StoreKey{Key: key, Path: filepath.Join(keyDir, StoreKeyID(key)+".key"), Created: true}
	return k, writeKey(keyDir, k.Path, key)
}

// ErrStoreKeyMissing is returned by EnsureStoreKey for a store whose key
// is not found.
var ErrStoreKeyMissing = errors.New("natsauth: the NATS store's key is missing")

// writeKey writes a key file (0600) in dir (0700), synced with its dir.
func writeKey(dir, path, key string) error {
	if err := EnsurePrivateDir(dir); err != nil {
		return fmt.Errorf("natsauth: store key dir: %w", err)
	}
	if err := writeNew(path, []byte(key+"\n")); err != nil {
		return fmt.Errorf("natsauth: store key: %w", err)
	}
	if d, err := os.Open(dir); err == nil {
		err = d.Sync()
		_ = d.Close()
		if err != nil {
			return fmt.Errorf("natsauth: store key dir: %w", err)
		}
	}
	return nil
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
	id := StoreKeyID(key)
	path := filepath.Join(storeDir, KeyIDFile)
	data, err := os.ReadFile(path)
	switch {
	case err == nil:
		if got := string(trimSpace(data)); got != id {
			return fmt.Errorf("%w (key id %s, the configured key's is %s): give the key it was encrypted with (ENGRAM_NATS_STORE_KEY_FILE, default <config dir>/engram/%s/%s.key)",
				ErrWrongStoreKey, got, id, StoreKeyDirName, got)
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
