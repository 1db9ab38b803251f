package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"syscall"

	"golang.org/x/sys/unix"
	"sigs.k8s.io/yaml"
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

// Output formats accepted by -o.
const (
	OutputTable = "table"
	OutputJSON  = "json"
	OutputYAML  = "yaml"
)

// checkOutput validates an -o value against the formats a command supports.
func checkOutput(format string, allowed ...string) error {
	for _, a := range allowed {
		if format == a {
			return nil
		}
	}
	return &ExitError{Code: ExitError2, Err: fmt.Errorf("unknown output format %q (want one of %v)", format, allowed)}
}

// writeStructured writes v as indented JSON or as YAML.
func writeStructured(w io.Writer, format string, v any) error {
	switch format {
	case OutputJSON:
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		enc.SetEscapeHTML(false) // fixes and fstab lines carry <, > and &; keep them readable
		return enc.Encode(v)
	case OutputYAML:
		b, err := yaml.Marshal(v)
		if err != nil {
			return err
		}
		_, err = w.Write(b)
		return err
	}
	return fmt.Errorf("unsupported structured format %q", format)
}
