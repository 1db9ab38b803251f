// Command nfstune audits, tunes, watches and benchmarks Linux NFS client mounts.
package main

import (
	"os"

	"github.com/nfstune/nfstune/internal/app"
)

func main() { os.Exit(app.Main()) }
