package callerauth

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"
)

const (
	hashPrefix = "sha256:"
	// Bounds on what is read from KeysDir (a mounted Secret): a Kubernetes Secret holds
	// at most 1 MiB in all, so these are never reached by a valid one.
	maxCallers  = 10000
	maxKeyBytes = 4096
	maxNameLen  = 253
)

type caller struct {
	name string
	hash [sha256.Size]byte
}

// keyring holds the hashes of the callers' keys, never a key. It reloads KeysDir when the
// directory changed (a file added, removed or replaced, or a Kubernetes Secret volume's
// `..data` link swapped: each renames an entry, which changes the directory's mtime), and
// reads every key file again at least every recheck (a file overwritten in place changes its
// content, not the directory: only reading it tells).
type keyring struct {
	dir     string
	mu      sync.Mutex
	stamp   stamp
	loaded  bool
	checked time.Time
	callers map[[sha256.Size]byte]string
}

// The shortest interval between two readings of every key file; it grows with the callers
// (reading 10,000 files takes tens of milliseconds): at most about 1% of the gateway's time.
const (
	recheckMin       = time.Second
	recheckPerCaller = time.Millisecond
)

// stamp is what tells a changed directory: its mtime and size, or that it is missing.
type stamp struct {
	mtime   int64
	size    int64
	missing bool
}

var (
	keyringsMu sync.Mutex
	keyrings   = map[string]*keyring{}
)

// sharedKeyring returns the one keyring of dir: every router of a gateway, and every
// configuration Traefik reloads, reads the same one.
func sharedKeyring(dir string) *keyring {
	keyringsMu.Lock()
	defer keyringsMu.Unlock()
	k := keyrings[dir]
	if k == nil {
		k = &keyring{dir: dir}
		keyrings[dir] = k
	}
	return k
}

// lookup returns the caller whose key hashes to h, or "". The hashes are a map's keys: a
// lookup costs the same for 10 callers or 10,000, and its timing can tell nothing of a key
// (the client picks the key, never its SHA-256).
func (k *keyring) lookup(h [sha256.Size]byte) string {
	return k.current()[h]
}

func (k *keyring) current() map[[sha256.Size]byte]string {
	stamped := dirStamp(k.dir)
	k.mu.Lock()
	defer k.mu.Unlock()
	at := clock()
	every := recheckMin + time.Duration(len(k.callers))*recheckPerCaller
	if !k.loaded || stamped != k.stamp || at.Sub(k.checked) >= every {
		callers, err := readCallers(k.dir)
		if err != nil {
			// Fail closed: a directory that cannot be read authenticates nobody.
			fmt.Fprintf(os.Stderr, "callerauth: %v\n", err)
			callers = nil
		}
		byHash := make(map[[sha256.Size]byte]string, len(callers))
		for _, c := range callers {
			byHash[c.hash] = c.name
		}
		k.callers, k.stamp, k.loaded, k.checked = byHash, stamped, true, at
	}
	return k.callers
}

// dirStamp is one stat per request: cheap, and what makes a rotation take effect at once.
func dirStamp(dir string) stamp {
	info, err := os.Stat(dir)
	if err != nil {
		return stamp{missing: true}
	}
	return stamp{mtime: info.ModTime().UnixNano(), size: info.Size()}
}

// readCallers reads one caller per regular file of dir (symbolic links followed, as a
// Secret volume's are); dot files are skipped. A caller whose key is not usable, or
// whose key is also another caller's (the identity would be ambiguous), is left out and
// named in the log, never its key.
func readCallers(dir string) ([]caller, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("keys directory %s cannot be read: %w", dir, err)
	}
	names := []string{}
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), ".") {
			names = append(names, e.Name())
		}
	}
	if len(names) > maxCallers {
		return nil, fmt.Errorf("keys directory %s has %d callers, more than %d", dir, len(names), maxCallers)
	}
	sort.Strings(names)
	callers := []caller{}
	owners := map[[sha256.Size]byte][]string{}
	for _, name := range names {
		if !validName(name) {
			fmt.Fprintf(os.Stderr, "callerauth: caller %q in %s: not a valid identity ([A-Za-z0-9._-], at most %d characters); ignored\n", name, dir, maxNameLen)
			continue
		}
		h, problem := readHash(filepath.Join(dir, name))
		if problem != "" {
			fmt.Fprintf(os.Stderr, "callerauth: caller %s in %s: %s; ignored\n", name, dir, problem)
			continue
		}
		owners[h] = append(owners[h], name)
		callers = append(callers, caller{name: name, hash: h})
	}
	kept := callers[:0]
	for _, c := range callers {
		if len(owners[c.hash]) > 1 {
			fmt.Fprintf(os.Stderr, "callerauth: callers %s in %s share one key; none of them is accepted\n", strings.Join(owners[c.hash], ", "), dir)
			continue
		}
		kept = append(kept, c)
	}
	return kept, nil
}

// readHash is the SHA-256 of the key in path, or the hash the file holds as
// `sha256:<hex>`; the key itself is dropped as soon as it is hashed.
func readHash(path string) ([sha256.Size]byte, string) {
	var h [sha256.Size]byte
	info, err := os.Stat(path)
	if err != nil {
		return h, "cannot be read"
	}
	if !info.Mode().IsRegular() {
		return h, "not a regular file"
	}
	f, err := os.Open(path)
	if err != nil {
		return h, "cannot be read"
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxKeyBytes+1))
	if err != nil {
		return h, "cannot be read"
	}
	if len(data) > maxKeyBytes {
		return h, fmt.Sprintf("longer than %d bytes", maxKeyBytes)
	}
	text := strings.TrimSpace(string(data))
	if text == "" {
		return h, "empty"
	}
	if strings.HasPrefix(text, hashPrefix) {
		raw, err := hex.DecodeString(text[len(hashPrefix):])
		if err != nil || len(raw) != sha256.Size {
			return h, "sha256: must be followed by 64 hexadecimal digits"
		}
		copy(h[:], raw)
		return h, ""
	}
	return sha256.Sum256([]byte(text)), ""
}

func validName(name string) bool {
	if name == "" || len(name) > maxNameLen {
		return false
	}
	for _, r := range name {
		ok := r == '-' || r == '_' || r == '.' || (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z') || (r >= '0' && r <= '9')
		if !ok {
			return false
		}
	}
	return true
}
