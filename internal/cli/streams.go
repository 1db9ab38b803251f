package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"syscall"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"golang.org/x/sys/unix"

	"github.com/nfstune/nfstune/internal/printer"
)

// IOStreams are the standard streams a command reads and writes; tests pass buffers.
type IOStreams struct {
	In     io.Reader
	Out    io.Writer
	ErrOut io.Writer
}

// Exit codes shared by every verb, so that scripts can branch on them.
const (
	ExitOK     = 0 // success, nothing to report at the failure threshold
	ExitIssues = 1 // the command ran and found something (findings at --fail-on, a partial apply or revert)
	ExitError2 = 2 // usage error, bad input, or the host could not be read
	// ExitRefused: a guard refused a dangerous action (nfstune shutdown of a server not seen
	// stalled without --force, or not confirmed).
	ExitRefused = 3
	// ExitUnsupported: the kernel lacks what the action needs (the NFS shutdown knob).
	ExitUnsupported = 4
	// ExitInterrupted: a signal ended the command before it could tell (128 + SIGINT, as
	// shells report it); a SIGTERM gives 143 (Interrupted).
	ExitInterrupted = 130
)

// Interrupted is the cause of a command's context cancelled by a signal (app.Main sets
// it): the exit code is then 128 + the signal's number.
type Interrupted struct {
	Signal syscall.Signal
}

func (i *Interrupted) Error() string { return "interrupted by " + unix.SignalName(i.Signal) }

// interruptedError returns, for a command whose context has ended, the exit error that
// says so (ExitInterrupted, or 128 + the signal of Interrupted) with what was cut short;
// nil while ctx runs.
func interruptedError(ctx context.Context, what string) error {
	if ctx.Err() == nil {
		return nil
	}
	cause := context.Cause(ctx)
	code := ExitInterrupted
	var sig *Interrupted
	if errors.As(cause, &sig) {
		code = 128 + int(sig.Signal)
	}
	return &ExitError{Code: code, Err: fmt.Errorf("%s: %w", what, cause)}
}

// ExitError carries an exit code out of a command. Err, when set, is printed once by app.
type ExitError struct {
	Code int
	Err  error
}

func (e *ExitError) Error() string {
	if e.Err == nil {
		return fmt.Sprintf("exit status %d", e.Code)
	}
	return e.Err.Error()
}

func (e *ExitError) Unwrap() error { return e.Err }

// Output formats accepted by -o (package printer's).
const (
	OutputTable = printer.Table
	OutputJSON  = printer.JSON
	OutputYAML  = printer.YAML
)

// addOutputFlag declares -o/--output on c: one of formats, the first the default, checked
// when the flag is set (an unknown format is a usage error, exit 2). Every command that
// prints a result declares it this way, with printer.Formats unless its output is a
// document another program reads (options' mount lines, k8s manifests, bench report's
// files); note, when not empty, ends the usage line.
func addOutputFlag(c *cobra.Command, p *string, formats []string, note string) {
	usage := "output format: " + strings.Join(formats, ", ")
	if note != "" {
		usage += " (" + note + ")"
	}
	c.Flags().VarP(printer.NewFormat(p, formats[0], formats...), "output", "o", usage)
	_ = c.RegisterFlagCompletionFunc("output", cobra.FixedCompletions(formats, cobra.ShellCompDirectiveNoFileComp))
}

// DeprecatedAnnotation marks a flag as a hidden, deprecated name of another, whose name
// it holds.
const DeprecatedAnnotation = "nfstune_deprecated_alias_of"

// deprecatedAlias declares old on c as a hidden, deprecated name of the flag name: the
// same value, for the command lines written before the flag was renamed. Using it prints
// a warning on stderr (warnDeprecated); pflag's own notice would go to stdout, into the
// output a script reads.
func deprecatedAlias(c *cobra.Command, old, name string) {
	f := c.Flags().Lookup(name)
	c.Flags().Var(f.Value, old, f.Usage)
	_ = c.Flags().MarkHidden(old)
	_ = c.Flags().SetAnnotation(old, DeprecatedAnnotation, []string{name})
}

// warnDeprecated warns on w of every deprecated alias set on c's command line.
func warnDeprecated(c *cobra.Command, w io.Writer) error {
	var err error
	c.Flags().Visit(func(f *pflag.Flag) {
		if name := f.Annotations[DeprecatedAnnotation]; len(name) == 1 && err == nil {
			_, err = fmt.Fprintf(w, "warning: --%s is deprecated, use --%s\n", f.Name, name[0])
		}
	})
	return err
}

// writeStructured writes v as indented JSON or as YAML.
func writeStructured(w io.Writer, format string, v any) error {
	switch format {
	case OutputJSON:
		return printer.WriteJSON(w, v)
	case OutputYAML:
		return printer.WriteYAML(w, v)
	}
	return fmt.Errorf("unsupported structured format %q", format)
}
