package config

import (
	"flag"
	"fmt"
	"io"
	"strings"
)

// WriteFlagReference writes a Markdown table of every flag, generated from
// the same definitions the command line uses. README.md embeds it.
func WriteFlagReference(w io.Writer) {
	fs := NewFlagSet(&Config{}, io.Discard)
	fmt.Fprintln(w, "| flag | default | description |")
	fmt.Fprintln(w, "|---|---|---|")
	fs.VisitAll(func(f *flag.Flag) {
		name, usage := flag.UnquoteUsage(f)
		flagCol := "`-" + f.Name
		if name != "" {
			flagCol += " " + name
		}
		flagCol += "`"
		def := f.DefValue
		if def != "" && def != "false" && def != "0" && def != "[]" {
			def = "`" + def + "`"
		} else {
			def = ""
		}
		fmt.Fprintf(w, "| %s | %s | %s |\n", flagCol, def, strings.NewReplacer("|", `\|`, "<", "&lt;", ">", "&gt;").Replace(usage))
	})
}
