package tune

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path"

	"github.com/nfstune/nfstune/internal/hostfs"
)

// ReadState decodes the JSON state file rel below root (one of nfstune's files in the
// journal's directory, such as InstalledPath) into v, reading at most max bytes. found is
// false, with no error, when there is no such file.
func ReadState(root hostfs.Root, rel string, max int64, v any) (found bool, err error) {
	b, err := hostfs.ReadFile(root.Path(rel), max)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err == nil {
		err = json.Unmarshal(b, v)
	}
	if err != nil {
		return false, fmt.Errorf("reading %q: %w", rel, err)
	}
	return true, nil
}

// WriteState writes v as JSON to the state file rel below root: a whole new file of mode
// 0600, never through a link (hostfs.Root.ReplaceFile), in a directory made 0700 as the
// journal's when it is missing.
func WriteState(root hostfs.Root, rel string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	d, err := root.OpenDir(path.Dir(rel), 0o700)
	if err != nil {
		return fmt.Errorf("writing %q: %w", rel, err)
	}
	d.Close()
	return root.ReplaceFile(rel, append(b, '\n'), 0o600)
}
