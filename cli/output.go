package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
	"gopkg.in/yaml.v3"
	"k8s.io/apimachinery/pkg/util/validation"

	roostv1 "github.com/roostfleet/roost/proto/roost/v1"
	"github.com/roostfleet/roost/resource"
)

// Output formats of get.
const (
	outTable = "table"
	outWide  = "wide"
	outJSON  = "json"
	outYAML  = "yaml"
	outName  = "name"
)

// writeStructured writes v (a struct with json and yaml tags) as json
// (indented by four spaces, like resource.Encode) or yaml. Both are
// deterministic: fields come in declaration order.
func writeStructured(w io.Writer, v any, format string) error {
	switch format {
	case outJSON:
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		enc.SetIndent("", "    ")
		if err := enc.Encode(v); err != nil {
			return err
		}
		_, err := w.Write(buf.Bytes())
		return err
	case outYAML:
		var buf bytes.Buffer
		enc := yaml.NewEncoder(&buf)
		enc.SetIndent(2)
		if err := enc.Encode(v); err != nil {
			return err
		}
		if err := enc.Close(); err != nil {
			return err
		}
		_, err := w.Write(buf.Bytes())
		return err
	}
	return usageErrorf("unknown output format %q (use json or yaml)", format)
}

// encodeObjects writes objects as json or yaml through resource.Encode, so
// the bytes depend only on the objects. With asList, json output is always
// a kind: List, even for one object, so that scripts reading a list do not
// have to handle a bare object when exactly one matched. No objects are an
// empty kind: List in both formats, as kubectl prints them.
func encodeObjects(objs []*roostv1.Object, format string, asList bool) ([]byte, error) {
	if format == outYAML && len(objs) == 0 {
		// The empty List json prints, in yaml.
		return []byte("apiVersion: " + resource.APIVersion + "\nkind: List\nitems: []\n"), nil
	}
	if format == outJSON && asList && len(objs) == 1 {
		one, err := resource.Encode(objs, outJSON)
		if err != nil {
			return nil, err
		}
		// Same layout as resource.Encode writes for several objects.
		const step = "    "
		body := strings.ReplaceAll(strings.TrimSuffix(string(one), "\n"), "\n", "\n"+step+step)
		var b strings.Builder
		b.WriteString("{\n")
		b.WriteString(step + `"apiVersion": "` + resource.APIVersion + "\",\n")
		b.WriteString(step + `"kind": "List",` + "\n")
		b.WriteString(step + `"items": [` + "\n")
		b.WriteString(step + step + body + "\n")
		b.WriteString(step + "]\n")
		b.WriteString("}\n")
		return []byte(b.String()), nil
	}
	return resource.Encode(objs, format)
}

// objectRef renders an object as "kind/name", the -o name form.
func objectRef(o *roostv1.Object) string {
	_, k := resource.Unwrap(o)
	if k == nil {
		return "unknown/" + resource.NameOf(o)
	}
	return k.Singular + "/" + resource.NameOf(o)
}

// fixedCompletions completes a flag or argument from a fixed list.
func fixedCompletions(values ...string) cobra.CompletionFunc {
	return func(*cobra.Command, []string, string) ([]cobra.Completion, cobra.ShellCompDirective) {
		return values, cobra.ShellCompDirectiveNoFileComp
	}
}

// noArgs refuses positional arguments with a usage error.
func noArgs(cmd *cobra.Command, args []string) error {
	if len(args) > 0 {
		return fmt.Errorf("%q takes no arguments, got %q", cmd.CommandPath(), args)
	}
	return nil
}

// unknownSubcommand refuses arguments of a command that only groups
// subcommands: an argument there is a mistyped subcommand.
func unknownSubcommand(cmd *cobra.Command, args []string) error {
	if len(args) == 0 {
		return nil
	}
	var names []string
	for _, c := range cmd.Commands() {
		if c.IsAvailableCommand() {
			names = append(names, c.Name())
		}
	}
	if cmd.SuggestionsMinimumDistance <= 0 {
		cmd.SuggestionsMinimumDistance = 2 // cobra's default for the root's subcommands
	}
	msg := fmt.Sprintf("unknown command %q for %q", args[0], cmd.CommandPath())
	if s := cmd.SuggestionsFor(args[0]); len(s) > 0 {
		msg += fmt.Sprintf(" (did you mean %q?)", s[0])
	}
	return fmt.Errorf("%s; its commands: %s", msg, strings.Join(names, ", "))
}

// exactArgs requires n positional arguments, naming them in the error.
func exactArgs(n int, names string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) != n {
			return fmt.Errorf("%q needs %s, got %d argument(s)", cmd.CommandPath(), names, len(args))
		}
		return noEmptyArg(cmd, args)
	}
}

// noEmptyArg refuses an empty argument (e.g. an unset shell variable), which
// names nothing, before anything is sent to the hub.
func noEmptyArg(cmd *cobra.Command, args []string) error {
	for i, a := range args {
		if a == "" {
			return fmt.Errorf("%q: argument %d is empty (an unset shell variable?)", cmd.CommandPath(), i+1)
		}
	}
	return nil
}

// checkNameArg checks that name, given as an argument for what (e.g. "a
// cluster NAME"), can name an object (a DNS-1123 label) before it is sent
// to the hub, which would only answer that no such object exists. The
// error is a usage error.
func checkNameArg(what, name string) error {
	if name == "" {
		return usageErrorf("%s is empty", what)
	}
	if msgs := validation.IsDNS1123Label(name); len(msgs) > 0 {
		return usageErrorf("%s %q cannot name an object: %s", what, name, msgs[0])
	}
	return nil
}

// minArgs requires at least n positional arguments.
func minArgs(n int, names string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) < n {
			return fmt.Errorf("%q needs %s", cmd.CommandPath(), names)
		}
		return noEmptyArg(cmd, args)
	}
}

// kindCompletions completes the first argument with kind names: each
// kind's plural, or the first of its other names (singular, short names)
// that starts with what was typed ("srv" stays "srv").
func kindCompletions(appliableOnly bool) cobra.CompletionFunc {
	return func(_ *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		if len(args) > 0 {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		var out []cobra.Completion
		for _, k := range resource.Kinds() {
			if appliableOnly && !k.Appliable {
				continue
			}
			for _, alias := range append([]string{k.Plural, k.Singular}, k.Short...) {
				if strings.HasPrefix(alias, toComplete) {
					out = append(out, cobra.CompletionWithDesc(alias, k.Name))
					break
				}
			}
		}
		return out, cobra.ShellCompDirectiveNoFileComp
	}
}

// lookupKind resolves a KIND argument; an unknown kind is a usage error.
func lookupKind(name string) (*resource.Kind, error) {
	k, err := resource.Lookup(name)
	if err != nil {
		// "pool/workers", as -o name prints it: say how to write it here.
		if kind, obj, ok := strings.Cut(name, "/"); ok {
			if k, kerr := resource.Lookup(kind); kerr == nil {
				return nil, usageErrorf("%q: give the kind and the name as two arguments: %s %s", name, k.Singular, obj)
			}
		}
		return nil, usageError{err}
	}
	return k, nil
}

// kindHelp lists the kinds and their aliases for help texts.
func kindHelp() string {
	var b strings.Builder
	for _, k := range resource.Kinds() {
		aliases := append([]string{k.Singular, k.Plural}, k.Short...)
		fmt.Fprintf(&b, "  %-18s %s\n", k.Name, strings.Join(aliases, ", "))
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// addCreateOutputFlag adds -o for commands that create objects: text by
// default, or the created objects as json, yaml or name.
func addCreateOutputFlag(cmd *cobra.Command, output *string) {
	addObjectOutputFlag(cmd, output, "output `FORMAT`: json, yaml or name (default: a line per created object)")
}

// addObjectOutputFlag adds -o with usage for commands that print the
// objects they created or changed as json, yaml or name (checkCreateOutput
// checks the value).
func addObjectOutputFlag(cmd *cobra.Command, output *string, usage string) {
	cmd.Flags().StringVarP(output, "output", "o", "", usage)
	_ = cmd.RegisterFlagCompletionFunc("output", fixedCompletions(outJSON, outYAML, outName))
}

// checkCreateOutput refuses an -o value addCreateOutputFlag does not offer.
func checkCreateOutput(output string) error {
	switch output {
	case "", outJSON, outYAML, outName:
		return nil
	}
	return usageErrorf("--output %q: use json, yaml or name (or nothing for text)", output)
}

// checkTableOutput refuses an -o value other than table, json or yaml (the
// commands that print one table or its structured form).
func checkTableOutput(output string) error {
	switch output {
	case outTable, outJSON, outYAML:
		return nil
	}
	return usageErrorf("--output %q: use table, json or yaml", output)
}
