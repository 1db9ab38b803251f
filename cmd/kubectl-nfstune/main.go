// Command kubectl-nfstune is the kubectl plugin that shows every node's nfstune agent
// (kubectl nfstune status, audit NODE, learned, top) through the API server.
package main

import (
	"os"

	"github.com/nfstune/nfstune/internal/plugin"
)

func main() { os.Exit(plugin.Main()) }
