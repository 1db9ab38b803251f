package tune

import (
	"cmp"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nfstune/nfstune/internal/hostfs"
	"github.com/nfstune/nfstune/internal/inventory"
	"github.com/nfstune/nfstune/internal/status"
)

// LearnedPath is where the agent keeps, per volume, the read-ahead its adaptive controller
// settled on (readahead.Controller.Settled), so that the next mount of the volume starts
// there (readahead.Controller.StartAt): a reader that opens its files before the
// controller's first interval keeps the window it opened with. It is nfstune's own state,
// beside the journal: the agent writes it; the agent, apply and the udev helper read it.
const LearnedPath = "/var/lib/nfstune/learned.json"

// MaxLearnedVolumes caps the volumes kept; the oldest go first.
const MaxLearnedVolumes = 4096

// maxLearnedSize caps the file read: MaxLearnedVolumes entries of a few hundred bytes.
const maxLearnedSize = 4 << 20

// LearnedValue is the read-ahead the controller settled on for one volume: the export of a
// server, as the mount names them (a name or an address). It is the agent's /status entry.
type LearnedValue = status.Learned

// learnedFile is LearnedPath's content.
type learnedFile struct {
	Volumes []LearnedValue `json:"volumes"`
}

// LearnedStore holds the learned values by volume: the agent's controllers change it, its
// /status lists it (Values), apply and the udev helper read it (Get), under mu.
type LearnedStore struct {
	root     hostfs.Root
	mu       sync.Mutex
	byVolume map[string]LearnedValue
}

func volumeKey(server, export string) string { return server + "\x00" + export }

// LoadLearned reads LearnedPath below root; a missing file is an empty store, and so is an
// unreadable one, with the error.
func LoadLearned(root hostfs.Root) (*LearnedStore, error) {
	l := &LearnedStore{root: root, byVolume: map[string]LearnedValue{}}
	var f learnedFile
	if _, err := ReadState(root, LearnedPath, maxLearnedSize, &f); err != nil {
		return l, err
	}
	for _, v := range f.Volumes {
		if v.Server == "" || v.Export == "" || v.ReadAheadKB < hostfs.MinReadAheadKB || strings.ContainsRune(v.Server+v.Export, 0) {
			continue // not one the agent wrote
		}
		l.byVolume[volumeKey(v.Server, v.Export)] = v
	}
	return l, nil
}

// volumeOf names m's volume: its server and export, or for a mount through a local proxy
// (EFS's efs-utils, AZNFS) the file system or upstream server the proxy forwards to, since
// every such mount names 127.0.0.1 and often "/". ok is false when that cannot be told: a
// loopback server on a port other than NFS's that no proxy attribution named (a proxy's
// port, which another volume takes next), or no server or export.
func volumeOf(m *inventory.Mount) (server, export string, ok bool) {
	server, export = m.Server, m.Export
	if m.Proxy != nil {
		server = cmp.Or(m.Proxy.FileSystemID, m.Proxy.Upstream)
	} else if a, err := netip.ParseAddr(cmp.Or(m.ServerAddr, m.Server)); err == nil && a.IsLoopback() &&
		cmp.Or(m.Options["port"], "2049") != "2049" {
		server = ""
	}
	return server, export, server != "" && export != ""
}

// Get returns the value learned for m's volume. A nil store has none.
func (l *LearnedStore) Get(m *inventory.Mount) (int, bool) {
	server, export, ok := volumeOf(m)
	if l == nil || !ok {
		return 0, false
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	v, ok := l.byVolume[volumeKey(server, export)]
	return v.ReadAheadKB, ok
}

// Set records kb for m's volume at now, and returns the entry when that changed what is
// kept.
func (l *LearnedStore) Set(m *inventory.Mount, kb int, now time.Time) (LearnedValue, bool) {
	server, export, ok := volumeOf(m)
	if !ok {
		return LearnedValue{}, false
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	k := volumeKey(server, export)
	if v, ok := l.byVolume[k]; ok && v.ReadAheadKB == kb {
		return LearnedValue{}, false
	}
	v := LearnedValue{Server: server, Export: export, ReadAheadKB: kb, At: now.UTC()}
	l.byVolume[k] = v
	for len(l.byVolume) > MaxLearnedVolumes {
		oldest := slices.MinFunc(slices.Collect(maps.Values(l.byVolume)), func(a, b LearnedValue) int { return a.At.Compare(b.At) })
		delete(l.byVolume, volumeKey(oldest.Server, oldest.Export))
	}
	return v, true
}

// Values returns the learned values, sorted by server and export; none for a nil store.
func (l *LearnedStore) Values() []LearnedValue {
	if l == nil {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	out := slices.Collect(maps.Values(l.byVolume))
	slices.SortFunc(out, func(a, b LearnedValue) int {
		return strings.Compare(volumeKey(a.Server, a.Export), volumeKey(b.Server, b.Export))
	})
	return out
}

// Save writes the store to LearnedPath (WriteState).
func (l *LearnedStore) Save() error {
	return WriteState(l.root, LearnedPath, learnedFile{Volumes: l.Values()})
}
