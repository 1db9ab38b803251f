package cli

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/nfstune/nfstune/internal/backend"
)

// backendValue is the value of a flag that names a backend (options' and k8s volume's
// --backend, plan show's and bench report's --service): an alias is stored as its
// canonical name, an unknown name is a usage error when the flag is set.
type backendValue struct{ p *string }

func (v backendValue) Set(s string) error {
	canonical, ok := backend.Canonical(s)
	if !ok {
		return fmt.Errorf("unknown backend: want one of %s", backendNames())
	}
	*v.p = canonical
	return nil
}

func (v backendValue) String() string { return *v.p }

func (v backendValue) Type() string { return "backend" }

// addBackendFlag declares the flag name, which names a backend, on c.
func addBackendFlag(c *cobra.Command, p *string, name, usage string) {
	c.Flags().Var(backendValue{p: p}, name, usage)
	_ = c.RegisterFlagCompletionFunc(name, cobra.FixedCompletions(backend.Names(), cobra.ShellCompDirectiveNoFileComp))
}

// backendNames lists the canonical names, each with its aliases: "aws-efs (amazon-efs,
// efs)".
func backendNames() string {
	var names []string
	for _, n := range backend.Names() {
		if a := backend.Aliases(n); len(a) > 0 {
			n += " (" + strings.Join(a, ", ") + ")"
		}
		names = append(names, n)
	}
	return strings.Join(names, ", ")
}
